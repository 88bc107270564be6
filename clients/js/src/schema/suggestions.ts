// Review mode, as pure functions: reading the server-owned `suggestions` root (a fairy in
// "suggest" mode proposes shape changes there instead of making them) into records, what each
// pending record would look like on the canvas (a create's whole shape, an update's keys merged
// over the current shape, the shape a delete would remove), which records are pending per fairy
// and request (the chat's *Accept all* / *Reject all*), and each fairy's apply mode (the
// entity's `apply`, overridden per browser). Reading is defensive: a malformed record is
// skipped, never thrown on. Nothing here writes the document or touches the DOM.
import * as Y from 'yjs'
import { MAIN_PAGE, readShapeJson, type Shape } from './shapes.js'
import type { components } from '../api/api.gen.js'

/** How a fairy's canvas changes land: made at once (`direct`) or proposed for review (`suggest`). */
export type ApplyMode = components['schemas']['ApplyMode']
export type SuggestionOp = 'create' | 'update' | 'delete'
/** Where a suggestion stands (the server's `Status`). */
export type SuggestionStatus = components['schemas']['Status']
/** A suggested key's value: `null` means "remove this key"; an array is a pen stroke's points. */
export type PropValue = number | string | boolean | number[] | null

/** One record of `suggestions` (docs/document-schema.md "Suggestions"). */
export interface Suggestion {
  id: string
  fairyId: string
  /** The fairy request it belongs to (`''` when the record names none). */
  requestId: string
  op: SuggestionOp
  shapeId: string
  /** The shape keys it would set: a create's whole shape, an update's changed keys, a delete's none. */
  props: Record<string, PropValue>
  status: SuggestionStatus
  at: number
  decidedBy: string | null
  decidedAt: number | null
  promptedBy: string
  model: string
}

/** Most keys read from one record's `props` (a shape has a couple of dozen). */
const MAX_PROPS = 200
/** Most numbers read from a stroke's `points`. */
const MAX_POINTS = 20_000

const OPS: readonly SuggestionOp[] = ['create', 'update', 'delete']
const STATUSES: readonly SuggestionStatus[] = ['pending', 'accepted', 'rejected']

/** A map-like reader over a `Y.Map` or a plain object; `null` for anything else. */
function keys (v: unknown): { get: (k: string) => unknown, entries: () => Array<[string, unknown]> } | null {
  if (v instanceof Y.Map) {
    const m = v as Y.Map<unknown>
    return { get: k => m.get(k), entries: () => [...m.entries()] }
  }
  if (typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Y.AbstractType)) {
    const o = v as Record<string, unknown>
    return { get: k => (Object.prototype.hasOwnProperty.call(o, k) ? o[k] : undefined), entries: () => Object.entries(o) }
  }
  return null
}

function str (v: unknown): string | null {
  return typeof v === 'string' ? v : null
}
/** A finite number; a Yjs `bigint` (a 64-bit integer the server wrote) as a number when it is safe. */
function finite (v: unknown): number | null {
  if (typeof v === 'bigint') return v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : null
  return typeof v === 'number' && Number.isFinite(v) ? v : null
}

/** One suggested value; `undefined` when it is none of the allowed kinds (the key is skipped). */
export function readPropValue (v: unknown): PropValue | undefined {
  if (v === null) return null
  if (typeof v === 'number' || typeof v === 'bigint') return finite(v) ?? undefined
  if (typeof v === 'string' || typeof v === 'boolean') return v
  const raw: unknown[] | null = v instanceof Y.Array ? v.toArray() : Array.isArray(v) ? v : null
  if (raw === null) return undefined
  return raw.slice(0, MAX_POINTS).flatMap(n => {
    const x = finite(n)
    return x !== null ? [x] : []
  })
}

/**
 * Reads one record of `suggestions`; `null` when it is malformed (not a map, an unknown `op` or
 * `status`, no `shapeId` or `fairyId`, props that are not a map on a create or update). The key
 * in `suggestions` is its id, whatever an inner `id` says.
 */
export function readSuggestion (key: string, value: unknown): Suggestion | null {
  const m = keys(value)
  if (m === null || key === '') return null
  const op = m.get('op')
  const status = m.get('status')
  const shapeId = str(m.get('shapeId'))
  const fairyId = str(m.get('fairyId'))
  if (!OPS.includes(op as SuggestionOp) || !STATUSES.includes(status as SuggestionStatus)) return null
  if (shapeId === null || shapeId === '' || fairyId === null || fairyId === '') return null
  const rawProps = m.get('props')
  const p = keys(rawProps)
  if (p === null && (op !== 'delete' || rawProps != null)) return null
  const props: Record<string, PropValue> = {}
  for (const [k, v] of (p?.entries() ?? []).slice(0, MAX_PROPS)) {
    const value = readPropValue(v)
    if (value !== undefined) props[k] = value
  }
  return {
    id: key,
    fairyId,
    requestId: str(m.get('requestId')) ?? '',
    op: op as SuggestionOp,
    shapeId,
    props,
    status: status as SuggestionStatus,
    at: finite(m.get('at')) ?? 0,
    decidedBy: str(m.get('decidedBy')),
    decidedAt: finite(m.get('decidedAt')),
    promptedBy: str(m.get('promptedBy')) ?? '',
    model: str(m.get('model')) ?? ''
  }
}

/** Every well-formed record of `suggestions` (a `Y.Map`, or its JSON form), oldest first. */
export function readSuggestions (root: unknown): Suggestion[] {
  const m = keys(root)
  if (m === null) return []
  const out: Suggestion[] = []
  for (const [k, v] of m.entries()) {
    const s = readSuggestion(k, v)
    if (s !== null) out.push(s)
  }
  return out.sort((a, b) => a.at - b.at || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
}

/** A shape's keys as plain data (a `Y.Map` of `shapes`, its points a plain array); `null` if it is none. */
export function shapeKeys (value: unknown): Record<string, unknown> | null {
  if (value instanceof Y.Map) return (value as Y.Map<unknown>).toJSON()
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? { ...value as Record<string, unknown> } : null
}

/** `props` applied over `current`: each key set, a `null` one removed. `current` is left alone. */
export function mergeProps (current: Readonly<Record<string, unknown>>, props: Readonly<Record<string, PropValue>>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...current }
  for (const [k, v] of Object.entries(props)) {
    if (v === null) delete out[k]
    else out[k] = v
  }
  return out
}

/**
 * The shape a record proposes: a create's props read as a shape, an update's props merged over
 * `current` (the shape's keys now; `null` when it is gone: then there is nothing to propose);
 * `null` for a delete. Read with the schema's defaults, under the record's `shapeId`.
 */
export function proposedShape (s: Suggestion, current: Readonly<Record<string, unknown>> | null): Shape | null {
  if (s.op === 'create') return readShapeJson(s.shapeId, s.props)
  if (s.op === 'update') return current === null ? null : readShapeJson(s.shapeId, mergeProps(current, s.props))
  return null
}

/** What the canvas draws for one pending record. */
export interface Ghost {
  id: string
  fairyId: string
  requestId: string
  op: SuggestionOp
  /** The proposed shape (create, update), drawn ghosted; `null` for a delete. */
  proposed: Shape | null
  /** The shape as it is now (update, delete); `null` for a create. */
  current: Shape | null
  /** Whether the fairy is still streaming it (`locked: true` in its props). */
  streaming: boolean
}

/**
 * The ghosts of the pending records on the main page, oldest first. `current(shapeId)` gives a
 * shape's keys now (`null` when it is not in `shapes`): an update or delete of a shape that is
 * gone has nothing to show (accepting it is refused; the chat's *Reject all* still clears it).
 * A create is shown even when its id was taken meanwhile, so that it can be rejected there.
 */
export function ghosts (list: readonly Suggestion[], current: (shapeId: string) => Record<string, unknown> | null): Ghost[] {
  const out: Ghost[] = []
  for (const s of list) {
    if (s.status !== 'pending') continue
    const now = s.op === 'create' ? null : current(s.shapeId)
    const nowShape = now !== null ? readShapeJson(s.shapeId, now) : null
    if (s.op !== 'create' && nowShape === null) continue
    const proposed = proposedShape(s, now)
    const onPage = (proposed ?? nowShape)?.pageId === MAIN_PAGE
    if (!onPage || (s.op !== 'delete' && proposed === null)) continue
    out.push({
      id: s.id,
      fairyId: s.fairyId,
      requestId: s.requestId,
      op: s.op,
      proposed: proposed !== null ? { ...proposed, locked: false } : null,
      current: s.op === 'create' ? null : nowShape,
      streaming: s.props.locked === true
    })
  }
  return out
}

/** How a request's records stand: the pending ids (oldest first) and how many were decided which way. */
export interface RequestTally { pending: string[], accepted: number, rejected: number }

/** The key of a fairy's request in `tallies`. */
export function requestKey (fairyId: string, requestId: string): string {
  return `${fairyId}\n${requestId}`
}

/** Each fairy request's records (by `requestKey`): pending ids, accepted and rejected counts. */
export function tallies (list: readonly Suggestion[]): Map<string, RequestTally> {
  const out = new Map<string, RequestTally>()
  for (const s of list) {
    if (s.requestId === '') continue
    const key = requestKey(s.fairyId, s.requestId)
    let t = out.get(key)
    if (t === undefined) { t = { pending: [], accepted: 0, rejected: 0 }; out.set(key, t) }
    if (s.status === 'pending') t.pending.push(s.id)
    else if (s.status === 'accepted') t.accepted++
    else t.rejected++
  }
  return out
}

/** The pending record ids of each fairy (all its requests together), oldest first. */
export function pendingByFairy (list: readonly Suggestion[]): Map<string, string[]> {
  const out = new Map<string, string[]>()
  for (const s of list) {
    if (s.status !== 'pending') continue
    const l = out.get(s.fairyId)
    if (l === undefined) out.set(s.fairyId, [s.id])
    else l.push(s.id)
  }
  return out
}

/** What a request's review reads as in the chat: "3 suggestions waiting", "2 accepted · 1 rejected". */
export function tallyLabel (t: RequestTally): string {
  const parts: string[] = []
  if (t.pending.length > 0) parts.push(`${t.pending.length} suggestion${t.pending.length === 1 ? '' : 's'} waiting`)
  if (t.accepted > 0) parts.push(`${t.accepted} accepted`)
  if (t.rejected > 0) parts.push(`${t.rejected} rejected`)
  return parts.join(' · ')
}

/** An apply mode from anything (the entity's `apply`, a stored choice); missing or unknown is `direct`. */
export function readApply (v: unknown): ApplyMode {
  return v === 'suggest' ? 'suggest' : 'direct'
}

/** Each fairy's default apply mode, from its entity's `apply` in the `fairies` root. */
export function readFairyApply (fairies: Y.Map<unknown>): Map<string, ApplyMode> {
  const out = new Map<string, ApplyMode>()
  fairies.forEach((value, id) => {
    const m = keys(value)
    if (m !== null) out.set(id, readApply(m.get('apply')))
  })
  return out
}

/** A fairy's toggle: the value this browser asked the server for (`asked`) until the entity shows it, else the entity's default. */
export function fairyToggle (asked: ApplyMode | undefined, entity: ApplyMode | undefined): ApplyMode {
  return asked ?? entity ?? 'direct'
}

/** What one prompt to a fairy sends: the per-prompt choice when the person made one, else its toggle. */
export function promptApply (choice: ApplyMode | null, toggle: ApplyMode): ApplyMode {
  return choice ?? toggle
}
