// What the fairies cost, as the page shows it (docs/fairies.md "Usage and budgets"): each
// request's usage on its chat item (the server's `usage`: calls, tokens, `costUsd` when priced),
// and the cost bar under the chat input (`data-cost`): the room's tokens this hour against
// `--fairy-token-budget` and yours today against `--fairy-token-budget-person`, with their money
// figures, read from `GET /rooms/{room}/usage` (the client package's `roomUsage`) when the page
// opens and again, debounced, after each request's usage lands in a chat.
// The formatting is pure; `CostBar` owns only its own element (made here, placed by the caller).
import type { ChatUsage, components } from '@fairyring/client'

type Schemas = components['schemas']
/** One set of totals of `GET /rooms/{room}/usage`. */
export type Totals = Schemas['Totals']
/** The answer of `GET /rooms/{room}/usage`. */
export type UsageAnswer = Schemas['UsageAnswer']

/** Tokens a budget counts: input + output + cache writes (docs/fairies.md, the room's budget). */
export function budgetTokens (t: Pick<Totals, 'inputTokens' | 'outputTokens' | 'cacheCreationInputTokens'>): number {
  return t.inputTokens + t.outputTokens + t.cacheCreationInputTokens
}

/** A token count for people: 950, 12,345, 123k, 1.2M. */
export function formatTokens (n: number): string {
  if (!Number.isFinite(n) || n < 0) return '0'
  if (n >= 1e6) return `${trim((n / 1e6).toFixed(n >= 1e7 ? 0 : 1))}M`
  if (n >= 1e5) return `${Math.round(n / 1e3)}k`
  return Math.round(n).toLocaleString('en-US')
}

function trim (s: string): string {
  return s.replace(/\.0$/, '')
}

/** US dollars for people: $1.23, $0.042, $0.0012 (small amounts keep two significant digits). */
export function formatUsd (usd: number): string {
  if (!Number.isFinite(usd) || usd <= 0) return '$0'
  if (usd >= 1) return `$${usd.toFixed(2)}`
  if (usd < 1e-6) return '<$0.000001'
  const digits = Math.min(6, Math.max(2, 1 - Math.floor(Math.log10(usd))))
  return `$${usd.toFixed(digits)}`
}

/**
 * What a request used, as its chat item says: "2 calls · 1,234 in · 56 out · 900 cached ·
 * $0.0012" (cache figures only when there are some; the money only when the model is priced).
 */
export function usageLabel (u: ChatUsage): string {
  const parts = [
    `${u.calls} call${u.calls === 1 ? '' : 's'}`,
    `${formatTokens(u.inputTokens)} in`,
    `${formatTokens(u.outputTokens)} out`
  ]
  if (u.cacheReadInputTokens > 0) parts.push(`${formatTokens(u.cacheReadInputTokens)} cached`)
  if (u.cacheCreationInputTokens > 0) parts.push(`${formatTokens(u.cacheCreationInputTokens)} cache write`)
  parts.push(u.costUsd !== undefined ? formatUsd(u.costUsd) : 'no price')
  return parts.join(' · ')
}

/** One line of the cost bar: tokens used against a budget (0: none), and the money when priced. */
export interface BudgetLine { label: string, used: number, limit: number, fraction: number | null, usd: number | null, text: string }

/** A line of the cost bar from a window's totals and its budget. */
export function budgetLine (label: string, t: Totals, limit: number): BudgetLine {
  const used = budgetTokens(t)
  const fraction = limit > 0 ? Math.min(1, used / limit) : null
  const usd = t.calls > t.unpricedCalls ? t.costUsd : null
  const money = usd !== null ? ` · ${formatUsd(usd)}` : ''
  const of = limit > 0 ? ` of ${formatTokens(limit)} tokens` : ' tokens (no limit)'
  return { label, used, limit, fraction, usd, text: `${label}: ${formatTokens(used)}${of}${money}` }
}

/** The cost bar's two lines: the room this hour, you today. */
export function costLines (u: UsageAnswer): BudgetLine[] {
  return [
    budgetLine('Room this hour', u.hour.total, u.budgets.roomPerHour),
    budgetLine('You today', u.you, u.budgets.personPerDay)
  ]
}

/**
 * Whether a token may read `/usage` (scope `fairies` or `admin`), from its payload, unverified:
 * only to spare the server a call it would refuse (and the page a console error). No token, or
 * one the page cannot read, is left to the server.
 */
export function tokenMayUseFairies (token: string | null | undefined): boolean {
  if (token === null || token === undefined || token === '') return true
  const part = token.split('.')[1]
  if (part === undefined) return true
  try {
    const b64 = part.replace(/-/g, '+').replace(/_/g, '/')
    const claims: unknown = JSON.parse(atob(b64 + '='.repeat((4 - b64.length % 4) % 4)))
    const scope = typeof claims === 'object' && claims !== null ? (claims as Record<string, unknown>).scope : undefined
    const words = typeof scope === 'string' ? scope.split(/[\s,]+/) : Array.isArray(scope) ? scope.filter((w): w is string => typeof w === 'string') : null
    return words === null || words.includes('fairies') || words.includes('admin')
  } catch {
    return true
  }
}

/** Waits this long after a change before asking the server again (one call per burst). */
export const COST_REFRESH_MS = 400

/** The cost bar: an element of its own, filled from `GET /rooms/{room}/usage`. */
export class CostBar {
  readonly node: HTMLElement
  private timer: ReturnType<typeof setTimeout> | undefined
  private inFlight = false
  private again = false

  constructor (private readonly fetchUsage: () => Promise<UsageAnswer>, private readonly allowed: () => boolean = () => true) {
    this.node = document.createElement('div')
    this.node.className = 'cost-bar'
    this.node.dataset.cost = 'loading'
    this.node.setAttribute('aria-live', 'polite')
    this.node.textContent = 'Fairy costs: …'
  }

  /** Asks the server again soon (calls close together make one request). */
  schedule (): void {
    clearTimeout(this.timer)
    this.timer = setTimeout(() => { void this.refresh() }, COST_REFRESH_MS)
  }

  /** Asks the server now (a call while one is on its way runs once it is back). */
  async refresh (): Promise<void> {
    if (this.inFlight) { this.again = true; return }
    if (!this.allowed()) {
      this.node.dataset.cost = 'unavailable'
      this.node.textContent = 'Fairy costs need a token with the fairies scope.'
      return
    }
    this.inFlight = true
    try {
      this.render(costLines(await this.fetchUsage()))
    } catch (e) {
      // A token without the fairies scope, or a server without fairies: say so quietly.
      this.node.dataset.cost = 'unavailable'
      this.node.textContent = 'Fairy costs are not available with this token.'
      this.node.title = String(e instanceof Error ? e.message : e)
    } finally {
      this.inFlight = false
      if (this.again) { this.again = false; this.schedule() }
    }
  }

  private render (lines: BudgetLine[]): void {
    this.node.dataset.cost = 'ready'
    this.node.title = 'Model tokens the room\'s fairies used (input + output + cache writes, what the budgets count), from GET /rooms/{room}/usage'
    this.node.replaceChildren(...lines.map((l, i) => {
      const row = document.createElement('div')
      row.className = 'cost-line'
      row.dataset.costLine = i === 0 ? 'room' : 'you'
      row.dataset.tokens = String(l.used)
      row.dataset.limit = String(l.limit)
      if (l.usd !== null) row.dataset.usd = String(l.usd)
      const text = document.createElement('span')
      text.textContent = l.text
      row.append(text)
      if (l.fraction !== null) {
        const meter = document.createElement('meter')
        meter.min = 0
        meter.max = 1
        meter.low = 0.7
        meter.high = 0.9
        meter.optimum = 0
        meter.value = l.fraction
        row.append(meter)
      }
      return row
    }))
  }
}
