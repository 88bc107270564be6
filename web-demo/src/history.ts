// The History panel's model, as pure functions (the answers of the history routes are read by
// @fairyring/client): merging pages, grouping entries into what
// the timeline shows (one row per person's run of edits, per fairy request), the words and colours
// of each row (coloured as in the People list, a fairy request with its prompt's text from the
// document), who created and who last changed each shape, and the bodies of restore and rollback.
// No DOM, no network: `historypanel.ts` and `historyapi.ts` use these.
import * as Y from 'yjs'
import { colorForId, type Actor, type HistoryEntry, type components } from '@fairyring/client'
import { fairyColors } from './fairies.js'

function isObj (v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

/**
 * The entries known after a page: those that end before the page's first entry, then the page
 * (a re-read last entry that grew since replaces the old copy). An empty page changes nothing.
 */
export function mergeEntries (existing: readonly HistoryEntry[], incoming: readonly HistoryEntry[]): HistoryEntry[] {
  const first = incoming[0]
  if (first === undefined) return [...existing]
  return [...existing.filter(e => e.toSeq < first.fromSeq), ...incoming]
}

/**
 * The `after` to refresh from: just before the last known entry (it is read again, as it may
 * have grown), or `null` (from the start) when nothing is known yet.
 */
export function refreshAfter (entries: readonly HistoryEntry[]): number | null {
  const last = entries[entries.length - 1]
  if (last === undefined || last.fromSeq === 0) return null
  return last.fromSeq - 1
}

/** What the timeline groups by: one person (and what the server did for them), one fairy request. */
export function actorKey (a: Actor): string {
  if (a.kind === 'fairy') return `fairy\u0000${a.id}\u0000${a.requestId ?? ''}`
  return `${a.kind}\u0000${a.id}\u0000${a.via ?? ''}`
}

/** One row of the timeline: consecutive entries of one actor key, with the net shape changes. */
export interface HistoryGroup {
  key: string
  actor: Actor
  fromSeq: number
  toSeq: number
  at: number
  until: number
  entries: number
  added: string[]
  updated: string[]
  removed: string[]
}

/** Entries of a person closer than this (ms) join one row; a fairy request is always one row. */
export const GROUP_GAP_MS = 10_000

/** Whether an entry changed shapes, or is a restore or rollback (those rows are always shown). */
function shown (e: HistoryEntry): boolean {
  return e.added.length + e.updated.length + e.removed.length > 0 || e.actor.via === 'restore' || e.actor.via === 'rollback'
}

/**
 * The rows of the timeline, oldest first: entries that changed no shape are left out (the
 * server's writes of chat and tasks), then consecutive entries of one actor key are joined (a
 * person's entries only while less than `gapMs` apart; the server's own entries between two
 * entries of one fairy request join it). A shape added and removed in one row counts for
 * neither; a shape added in it is not also "changed".
 */
export function groupEntries (entries: readonly HistoryEntry[], gapMs = GROUP_GAP_MS): HistoryGroup[] {
  const groups: HistoryGroup[] = []
  const ops: Array<Map<string, { first: 'added' | 'updated' | 'removed', last: 'added' | 'updated' | 'removed' }>> = []
  const visible = entries.filter(shown)
  visible.forEach((e, i) => {
    const key = actorKey(e.actor)
    const prev = groups[groups.length - 1]
    const next = visible[i + 1]
    // What the server does on its own in the middle of a fairy request (between two of its
    // entries: replacing a shape the fairy streamed) is part of that request's row.
    const inRequest = e.actor.kind === 'server' && prev?.actor.kind === 'fairy' && prev.actor.requestId !== null &&
      next !== undefined && actorKey(next.actor) === prev.key
    const join = prev !== undefined && (inRequest ||
      (prev.key === key && ((e.actor.kind === 'fairy' && e.actor.requestId !== null) || e.at - prev.until < gapMs)))
    if (!join || prev === undefined) {
      groups.push({ key, actor: e.actor, fromSeq: e.fromSeq, toSeq: e.toSeq, at: e.at, until: e.until, entries: 0, added: [], updated: [], removed: [] })
      ops.push(new Map())
    }
    const g = groups[groups.length - 1]
    const m = ops[ops.length - 1]
    if (g === undefined || m === undefined) return
    g.toSeq = Math.max(g.toSeq, e.toSeq)
    g.until = Math.max(g.until, e.until)
    g.entries++
    const note = (id: string, op: 'added' | 'updated' | 'removed'): void => {
      const known = m.get(id)
      if (known === undefined) m.set(id, { first: op, last: op })
      else known.last = op
    }
    for (const id of e.added) note(id, 'added')
    for (const id of e.updated) note(id, 'updated')
    for (const id of e.removed) note(id, 'removed')
  })
  groups.forEach((g, i) => {
    for (const [id, { first, last }] of ops[i] ?? new Map()) {
      if (first === 'added' && last === 'removed') continue
      if (last === 'removed') g.removed.push(id)
      else if (first === 'added') g.added.push(id)
      else g.updated.push(id)
    }
  })
  return groups
}

/** Who created a shape and who last changed it (added or updated it), from the history. */
export interface ShapeAuthors { created: Actor | null, createdAt: number, changed: Actor | null, changedAt: number }

/**
 * Each shape's creator (its first `added`; a shape added again without `via` after it was
 * removed has a new creator, one brought back by a restore or a rollback keeps its own) and last
 * changer (the latest `added` or `updated`), walking the entries oldest first.
 */
export function shapeAuthors (entries: readonly HistoryEntry[]): Map<string, ShapeAuthors> {
  const out = new Map<string, ShapeAuthors>()
  const gone = new Set<string>()
  for (const e of entries) {
    for (const id of e.added) {
      const known = out.get(id)
      if (known === undefined || known.created === null || (gone.has(id) && e.actor.via === null)) {
        out.set(id, { created: e.actor, createdAt: e.at, changed: e.actor, changedAt: e.until })
      } else {
        known.changed = e.actor
        known.changedAt = e.until
      }
      gone.delete(id)
    }
    for (const id of e.updated) {
      const known = out.get(id)
      if (known === undefined) out.set(id, { created: null, createdAt: 0, changed: e.actor, changedAt: e.until })
      else { known.changed = e.actor; known.changedAt = e.until }
    }
    for (const id of e.removed) gone.add(id)
  }
  return out
}

/** The actor a shape's `createdBy` names (`user:SUB`, `fairy:ID`), the fallback for its creator. */
export function actorFromCreatedBy (createdBy: string): Actor | null {
  const m = /^(user|fairy):(.+)$/.exec(createdBy)
  if (m === null || m[1] === undefined || m[2] === undefined) return null
  return { kind: m[1], id: m[2], name: null, requestId: null, promptedBy: null, model: null, projectId: null, taskId: null, via: null }
}

function plain (v: unknown): Record<string, unknown> | null {
  if (v instanceof Y.Map) return (v as Y.Map<unknown>).toJSON()
  return isObj(v) ? v : null
}

/** The key of `promptIndex`. */
export function promptKey (fairyId: string, requestId: string): string {
  return `${fairyId}\u0000${requestId}`
}

/**
 * The prompts of fairy requests, from the document: `fairies/{id}/chat` items with a `requestId`
 * and `role: "user"` (the first such item of a request is its prompt). Keyed by `promptKey`.
 */
export function promptIndex (fairies: Y.Map<unknown>): Map<string, string> {
  const out = new Map<string, string>()
  fairies.forEach((value, fairyId) => {
    if (!(value instanceof Y.Map)) return
    const chat = (value as Y.Map<unknown>).get('chat')
    const items: unknown[] = chat instanceof Y.Array ? chat.toArray() : Array.isArray(chat) ? chat : []
    for (const it of items) {
      const p = plain(it)
      if (p === null || p.role !== 'user' || typeof p.requestId !== 'string' || p.requestId === '' || typeof p.text !== 'string') continue
      const key = promptKey(fairyId, p.requestId)
      if (!out.has(key)) out.set(key, p.text)
    }
  })
  return out
}

/** What the page knows of the people and fairies in the room, to name and colour actors. */
export interface PeopleContext {
  me: { id: string, name: string, color: string }
  /** Other browsers by sub: name and colour from their awareness state. */
  users: ReadonlyMap<string, { name: string, color: string }>
  /** Display names by id (people's subs and fairy ids). */
  names: ReadonlyMap<string, string>
  /** Each fairy's own colour by id (`FairyView.own`: its list dot and chat name), for the fairies in the room. */
  fairyColors?: ReadonlyMap<string, string>
}

/** The pink of the logo: a fairy's colour only when the palette is empty (`fairyColors`). */
export const FAIRY_COLOR = '#f9a8d4'
/** The colour of the server's own updates. */
export const SERVER_COLOR = '#9ca3af'

/** People's names as the history gives them (`actor.name`, the latest wins): names of people who left. */
export function historyNames (entries: readonly HistoryEntry[]): Map<string, string> {
  const out = new Map<string, string>()
  for (const e of entries) if (e.actor.kind === 'user' && e.actor.name !== null) out.set(e.actor.id, e.actor.name)
  return out
}

/** The page's context with names learnt from the history behind the page's own. */
export function withHistoryNames (ctx: PeopleContext, learnt: ReadonlyMap<string, string>): PeopleContext {
  if (learnt.size === 0) return ctx
  return { ...ctx, names: new Map([...learnt, ...ctx.names]) }
}

/**
 * An actor's colour, as the People and Fairies lists show it: a person's colour, a fairy's own
 * colour (one no longer in the room: its id's slot of the palette, as the list gave it when it
 * was alone), grey for the server.
 */
export function actorColor (a: Actor, ctx: PeopleContext): string {
  if (a.kind === 'fairy') return ctx.fairyColors?.get(a.id) ?? fairyColors([a.id]).get(a.id) ?? FAIRY_COLOR
  if (a.kind === 'user') {
    if (a.id === ctx.me.id) return ctx.me.color
    return ctx.users.get(a.id)?.color ?? colorForId(a.id)
  }
  return SERVER_COLOR
}

/** An actor's name: the one the server gave, else the page's, else the id (fairies: "a fairy"). */
export function actorName (a: Actor, ctx: PeopleContext): string {
  if (a.kind === 'server') return 'the server'
  if (a.kind === 'user' && a.id === ctx.me.id) return ctx.me.name
  return a.name ?? ctx.users.get(a.id)?.name ?? ctx.names.get(a.id) ?? (a.kind === 'fairy' ? `fairy ${a.id.slice(0, 8)}` : a.id)
}

/** A person's name by sub (for "asked by"). */
export function personName (sub: string, ctx: PeopleContext): string {
  if (sub === ctx.me.id) return ctx.me.name
  return ctx.users.get(sub)?.name ?? ctx.names.get(sub) ?? sub
}

/** "added 2 shapes · changed 1 · removed 1" (or "no shape changed"). */
export function changeSummary (g: Pick<HistoryGroup, 'added' | 'updated' | 'removed'>): string {
  const parts: string[] = []
  const n = (k: number, one: string, many: string): string => `${k} ${k === 1 ? one : many}`
  if (g.added.length > 0) parts.push(`added ${n(g.added.length, 'shape', 'shapes')}`)
  if (g.updated.length > 0) parts.push(`changed ${parts.length > 0 ? g.updated.length : n(g.updated.length, 'shape', 'shapes')}`)
  if (g.removed.length > 0) parts.push(`removed ${parts.length > 0 ? g.removed.length : n(g.removed.length, 'shape', 'shapes')}`)
  return parts.length > 0 ? parts.join(' · ') : 'no shape changed'
}

/** One timeline row as the panel shows it. */
export interface RowView {
  who: string
  color: string
  /** Whether the row is this browser's person (shown "(you)"). */
  you: boolean
  /** `person`, `fairy`, `server`: what the row's dot stands for. */
  kind: string
  /** What happened: the change summary, or what the server did for the person. */
  what: string
  /** A fairy request's prompt (from the document), or `null`. */
  prompt: string | null
  /** "asked by NAME" for a fairy request, "" otherwise. */
  detail: string
  /** The name in "Take back everything NAME did since then", or `null` when it cannot be taken back. */
  takeBack: string | null
}

/** The words and colour of one timeline row. */
export function rowView (g: HistoryGroup, ctx: PeopleContext, prompts: ReadonlyMap<string, string>): RowView {
  const a = g.actor
  const who = actorName(a, ctx)
  const summary = changeSummary(g)
  let what = summary
  if (a.via === 'restore') what = `restored an earlier version (${summary})`
  else if (a.via === 'rollback') what = `took back changes (${summary})`
  else if (a.via === 'api') what = `${summary}, through the API`
  const prompt = a.kind === 'fairy' && a.requestId !== null ? prompts.get(promptKey(a.id, a.requestId)) ?? null : null
  const details: string[] = []
  if (a.kind === 'fairy') {
    if (a.promptedBy !== null) details.push(`asked by ${personName(a.promptedBy, ctx)}`)
    if (a.projectId !== null) details.push('in a project')
  }
  return {
    who,
    color: actorColor(a, ctx),
    you: a.kind === 'user' && a.id === ctx.me.id,
    kind: a.kind === 'user' ? 'person' : a.kind === 'fairy' ? 'fairy' : 'server',
    what,
    prompt,
    detail: details.join(' · '),
    takeBack: a.kind === 'user' || a.kind === 'fairy' ? who : null
  }
}

/** The words of the hover card of a shape: who created it and who last changed it. */
export function authorLines (shapeId: string, createdBy: string, authors: ReadonlyMap<string, ShapeAuthors>, ctx: PeopleContext,
  prompts: ReadonlyMap<string, string>, now: number): { created: string, changed: string | null, createdBy: Actor | null, changedBy: Actor | null } {
  const known = authors.get(shapeId)
  const creator = known?.created ?? actorFromCreatedBy(createdBy)
  const label = (a: Actor): string => {
    const name = actorName(a, ctx) + (a.kind === 'user' && a.id === ctx.me.id ? ' (you)' : '')
    const prompt = a.kind === 'fairy' && a.requestId !== null ? prompts.get(promptKey(a.id, a.requestId)) : undefined
    return prompt !== undefined ? `${name}: “${ellipsize(prompt, 60)}”` : name
  }
  const created = creator === null
    ? 'Created by someone unknown'
    : `Created by ${label(creator)}${known?.created != null && known.createdAt > 0 ? `, ${relativeTime(known.createdAt, now)}` : ''}`
  const changer = known?.changed ?? null
  const changed = changer === null ? null : `Last changed by ${label(changer)}${known !== undefined && known.changedAt > 0 ? `, ${relativeTime(known.changedAt, now)}` : ''}`
  return { created, changed, createdBy: creator, changedBy: changer }
}

/** A text cut to `max` characters with an ellipsis. */
export function ellipsize (text: string, max: number): string {
  const t = text.replace(/\s+/g, ' ').trim()
  return t.length <= max ? t : `${t.slice(0, Math.max(1, max - 1))}…`
}

/** "just now", "5 s ago", "3 min ago", "2 h ago", "4 d ago". */
export function relativeTime (at: number, now: number): string {
  const s = Math.round((now - at) / 1000)
  if (s < 3) return 'just now'
  if (s < 60) return `${s} s ago`
  if (s < 3600) return `${Math.floor(s / 60)} min ago`
  if (s < 86_400) return `${Math.floor(s / 3600)} h ago`
  return `${Math.floor(s / 86_400)} d ago`
}

/** The body of `POST /rooms/{room}/restore` for the version shown after a row. */
export function restoreBody (seq: number): { seq: number } {
  return { seq }
}

/**
 * The body of `POST /rooms/{room}/rollback` for "take back everything NAME did since then":
 * the row's actor (kind and id) and the sequence number just before the row; `null` for the
 * server's own updates.
 */
export function rollbackBody (g: Pick<HistoryGroup, 'actor' | 'fromSeq'>): components['schemas']['RollbackBody'] | null {
  const kind = g.actor.kind === 'user' ? 'user' : g.actor.kind === 'fairy' ? 'fairy' : null
  if (kind === null) return null
  return { actor: { kind, id: g.actor.id }, sinceSeq: Math.max(0, g.fromSeq - 1) }
}

/** What a rollback answered (`{reverted, kept, seq}`), in words. */
export function describeRollback (body: unknown, name: string): string {
  const b = isObj(body) ? body : {}
  const n = (v: unknown): number => (typeof v === 'number' && Number.isFinite(v) ? v : 0)
  const reverted = n(b.reverted)
  const kept = n(b.kept)
  if (reverted === 0 && kept === 0) return `Nothing of ${name}'s was left to take back.`
  const changes = `${reverted} change${reverted === 1 ? '' : 's'}`
  return `Took back ${changes} by ${name}${kept > 0 ? `; kept ${kept} that others changed since` : ''}.`
}

