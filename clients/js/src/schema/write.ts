// Writing shapes and pages in the document schema (docs/document-schema.md), with the rules the
// server's REST writes apply (docs/rest.md "PATCH /rooms/{room}/shapes", src/canvas/patch.rs):
// known types only, each family's keys and no other, tldraw's colour and fill names (normalised
// as the server does), finite numbers clamped to ±10⁷, sizes made positive, at most 2,000 pen
// points, shape ids of 1–128 characters without control characters, bindings only to shapes
// that exist. What breaks a rule is refused with a `SchemaError` naming the key; nothing is
// written then. Writers set only the keys whose value changes (so a concurrent edit of another
// property survives), one Yjs transaction per call, with the caller's origin.
import * as Y from 'yjs'
import {
  COMMON_KEYS, COORD_LIMIT, FAMILY_KEYS, MAX_KEY_CHARS, MAX_PEN_POINTS, familyOf,
  normalizeColor, normalizeFill, normalizeShapeId, normalizeTextAlign, type ShapeFamily, type ShapeType
} from './vocabulary.js'
import { MAIN_PAGE } from './shapes.js'
import { keyAbove } from './zorder.js'

/** A value a shape key holds: numbers, strings, booleans, a pen stroke's flat points; `null` removes the key. */
export type ShapeValue = string | number | boolean | number[] | null

/** A shape as plain keys (what `PATCH …/shapes` and `GET …/doc` carry). */
export interface ShapeInput {
  id?: string
  type: ShapeType | string
  pageId?: string
  x?: number
  y?: number
  rotation?: number
  index?: string
  color?: string
  fill?: string
  note?: string
  locked?: boolean
  createdBy?: string
  w?: number
  h?: number
  text?: string
  textAlign?: string
  fontSize?: number
  maxWidth?: number | null
  x1?: number
  y1?: number
  x2?: number
  y2?: number
  fromId?: string | null
  toId?: string | null
  bend?: number
  points?: number[]
}

/** A change of some keys of one shape (`null` removes `maxWidth`, `fromId`, `toId`). */
export type ShapeChanges = Partial<Omit<ShapeInput, 'id'>> & Record<string, unknown>

/** A write the schema refuses, naming the key (`''` for the shape as a whole). */
export class SchemaError extends Error {
  constructor (readonly key: string, message: string) { super(message) }
}

const NULLABLE = new Set(['maxWidth', 'fromId', 'toId'])

function finiteNumber (key: string, v: unknown): number {
  let n: number | null = null
  if (typeof v === 'number') n = v
  else if (typeof v === 'string' && v.trim() !== '') n = Number(v)
  if (n === null || !Number.isFinite(n)) throw new SchemaError(key, `'${key}' must be a finite number`)
  return Math.max(-COORD_LIMIT, Math.min(COORD_LIMIT, n))
}

function shortText (key: string, v: unknown): string {
  if (typeof v !== 'string') throw new SchemaError(key, `'${key}' must be a string`)
  if (key !== 'text' && key !== 'note' && [...v].length > MAX_KEY_CHARS) throw new SchemaError(key, `'${key}' is longer than ${MAX_KEY_CHARS} characters`)
  return v
}

/**
 * Checks and normalises one key of a shape of `family`; the value to store. Throws a
 * `SchemaError` for a key the family does not have or a value the server would refuse.
 */
export function checkShapeKey (family: ShapeFamily, key: string, v: unknown, exists: (id: string) => boolean = () => true, selfId = ''): ShapeValue {
  if (!(COMMON_KEYS as readonly string[]).includes(key) && !FAMILY_KEYS[family].includes(key)) {
    throw new SchemaError(key, `'${key}' is not a key of a ${family} shape`)
  }
  if (v === null && NULLABLE.has(key)) return null
  switch (key) {
    case 'id': case 'pageId': case 'createdBy': case 'note': case 'text':
      return shortText(key, v)
    case 'type': {
      const t = shortText(key, v)
      if (familyOf(t) !== family) throw new SchemaError(key, `'${t}' is not a ${family} type`)
      return t
    }
    case 'index': {
      const s = shortText(key, v)
      // eslint-disable-next-line no-control-regex
      if (s === '' || /[\u0000-\u001f\u007f]/.test(s)) throw new SchemaError(key, "'index' must be a non-empty z-order key")
      return s
    }
    case 'color': {
      const c = typeof v === 'string' ? normalizeColor(v) : null
      if (c === null) throw new SchemaError(key, `'color' has no such value: ${String(v).slice(0, 64)}`)
      return c
    }
    case 'fill': {
      const f = typeof v === 'string' ? normalizeFill(v) : null
      if (f === null) throw new SchemaError(key, `'fill' has no such value: ${String(v).slice(0, 64)}`)
      return f
    }
    case 'textAlign': {
      const a = typeof v === 'string' ? normalizeTextAlign(v) : null
      if (a === null) throw new SchemaError(key, `'textAlign' has no such value: ${String(v).slice(0, 64)}`)
      return a
    }
    case 'locked':
      if (typeof v !== 'boolean') throw new SchemaError(key, "'locked' must be true or false")
      return v
    case 'w': case 'h': case 'maxWidth':
      return Math.abs(finiteNumber(key, v))
    case 'fontSize':
      return Math.max(1, Math.abs(finiteNumber(key, v)))
    case 'fromId': case 'toId': {
      const id = typeof v === 'string' ? normalizeShapeId(v) : null
      if (id === null) throw new SchemaError(key, `'${key}' must be a shape id or null`)
      if (id === selfId || !exists(id)) throw new SchemaError(key, `'${key}': no shape '${id}' to bind to`)
      return id
    }
    case 'points': {
      if (!Array.isArray(v)) throw new SchemaError(key, "'points' must be a flat array of numbers [x0, y0, x1, y1, …]")
      if (v.length % 2 !== 0 || v.length > 2 * MAX_PEN_POINTS) throw new SchemaError(key, `'points' must hold pairs of numbers, at most ${MAX_PEN_POINTS} points`)
      return v.map(n => finiteNumber(key, n))
    }
    default:
      return finiteNumber(key, v)
  }
}

/** The defaults a created shape gets for the keys it does not give (the server's `create`'s). */
function defaults (family: ShapeFamily, x: number, y: number): Record<string, ShapeValue> {
  const common = { rotation: 0, color: 'black', fill: 'none', note: '', locked: false }
  switch (family) {
    case 'geo': return { ...common, w: 100, h: 100, text: '', textAlign: 'middle' }
    case 'text': return { ...common, text: '', fontSize: 24, textAlign: 'start' }
    case 'note': return { ...common, text: '' }
    case 'link': return { ...common, x1: x, y1: y, x2: x + 100, y2: y, bend: 0, text: '' }
    case 'draw': return { ...common, points: [] }
  }
}

/**
 * A new shape's keys, checked: the given keys over the defaults, `id` and `type` set, `x, y` of
 * an arrow or line kept at its ends' top-left. Throws a `SchemaError` on the first bad key.
 */
export function shapeRecord (input: ShapeInput, exists: (id: string) => boolean = () => true): Record<string, ShapeValue> {
  const family = typeof input.type === 'string' ? familyOf(input.type) : null
  if (family === null) throw new SchemaError('type', `'${String(input.type).slice(0, 64)}' is not a shape type of the schema`)
  const id = typeof input.id === 'string' ? normalizeShapeId(input.id) : null
  if (id === null) throw new SchemaError('id', 'a shape id is 1–128 characters without control characters')
  const given: Record<string, ShapeValue> = {}
  for (const [k, v] of Object.entries(input)) {
    if (v === undefined || k === 'id') continue
    given[k] = checkShapeKey(family, k, v, exists, id)
  }
  const x = typeof given.x === 'number' ? given.x : 0
  const y = typeof given.y === 'number' ? given.y : 0
  const out: Record<string, ShapeValue> = { ...defaults(family, x, y), x, y, pageId: MAIN_PAGE, ...given, id }
  if (family === 'link') {
    const n = (k: string): number => out[k] as number
    out.x = Math.min(n('x1'), n('x2'))
    out.y = Math.min(n('y1'), n('y2'))
  }
  for (const k of NULLABLE) if (out[k] === null) delete out[k]
  return out
}

function toYValue (v: ShapeValue): unknown {
  if (Array.isArray(v)) {
    const a = new Y.Array<number>()
    a.push(v)
    return a
  }
  return v
}

/** The `shapes` root of a document. */
export function shapesOf (doc: Y.Doc): Y.Map<unknown> {
  return doc.getMap('shapes')
}

/** A fresh shape id: the type and a random suffix (`rect-k3j9x2`). */
export function newShapeId (type: string, rand: () => number = Math.random): string {
  const stem = type.replace(/[^a-z]/g, '').slice(0, 8) || 'shape'
  let suffix = ''
  for (let i = 0; i < 8; i++) suffix += '0123456789abcdefghijklmnopqrstuvwxyz'[Math.floor(rand() * 36) % 36]
  return `${stem}-${suffix}`
}

/** Whether a shape with this id is in `shapes`. */
function hasShape (shapes: Y.Map<unknown>, id: string): boolean {
  return shapes.get(id) instanceof Y.Map
}

/**
 * Creates one shape (checked; a fresh id when none is given; `index` on top of its page when
 * none is given) in one transaction with `origin`; its id. Throws a `SchemaError` when the
 * input breaks a rule or the id is taken.
 */
export function createShape (doc: Y.Doc, input: ShapeInput, origin: unknown = null): string {
  const shapes = shapesOf(doc)
  const record = shapeRecord({ ...input, id: input.id ?? newShapeId(String(input.type)) }, id => hasShape(shapes, id))
  const id = record.id as string
  if (shapes.has(id)) throw new SchemaError('id', `a shape '${id}' exists already`)
  if (input.index === undefined) {
    const page = record.pageId
    const indexes: string[] = []
    shapes.forEach(v => {
      if (v instanceof Y.Map && v.get('pageId') === page && typeof v.get('index') === 'string') indexes.push(v.get('index') as string)
    })
    record.index = keyAbove(indexes)
  }
  doc.transact(() => {
    const m = new Y.Map<unknown>()
    for (const [k, v] of Object.entries(record)) m.set(k, toYValue(v))
    shapes.set(id, m)
  }, origin)
  return id
}

function sameValue (current: unknown, next: ShapeValue): boolean {
  if (Array.isArray(next)) {
    const cur = current instanceof Y.Array ? current.toArray() : current
    return Array.isArray(cur) && cur.length === next.length && cur.every((n, i) => n === next[i])
  }
  return current === next
}

/**
 * Changes keys of one shape, checked against its family, writing only the values that differ
 * (in one transaction with `origin`); the keys written. `type` may change within its family.
 * Throws a `SchemaError` when the shape is missing or a key breaks a rule (nothing written).
 */
export function updateShape (doc: Y.Doc, id: string, changes: ShapeChanges, origin: unknown = null): string[] {
  const shapes = shapesOf(doc)
  const m = shapes.get(id)
  if (!(m instanceof Y.Map)) throw new SchemaError('', `no shape '${id}'`)
  const family = familyOf(typeof m.get('type') === 'string' ? m.get('type') as string : '')
  if (family === null) throw new SchemaError('type', `shape '${id}' has an unknown type`)
  const checked: Array<[string, ShapeValue]> = []
  for (const [k, v] of Object.entries(changes)) {
    if (v === undefined || k === 'id') continue
    checked.push([k, checkShapeKey(family, k, v, other => hasShape(shapes, other), id)])
  }
  if (family === 'link') linkOrigin(m, checked)
  const written: string[] = []
  doc.transact(() => {
    for (const [k, v] of checked) {
      if (v === null) {
        if (m.has(k)) { m.delete(k); written.push(k) }
      } else if (!sameValue(m.get(k), v)) {
        m.set(k, toYValue(v))
        written.push(k)
      }
    }
  }, origin)
  return written
}

/**
 * Keeps an arrow's or line's `x, y` at its ends' top-left: new ends move `x, y`; `x, y` given
 * without ends move both ends (as the server's patch does).
 */
function linkOrigin (m: Y.Map<unknown>, checked: Array<[string, ShapeValue]>): void {
  const given = new Map(checked)
  const num = (k: string, fallback: number): number => {
    const v = given.has(k) ? given.get(k) : m.get(k)
    return typeof v === 'number' && Number.isFinite(v) ? v : fallback
  }
  const x0 = typeof m.get('x') === 'number' ? m.get('x') as number : 0
  const y0 = typeof m.get('y') === 'number' ? m.get('y') as number : 0
  const ends = ['x1', 'y1', 'x2', 'y2']
  if (ends.some(k => given.has(k))) {
    const x1 = num('x1', x0); const x2 = num('x2', x0); const y1 = num('y1', y0); const y2 = num('y2', y0)
    given.set('x', Math.min(x1, x2))
    given.set('y', Math.min(y1, y2))
  } else if (given.has('x') || given.has('y')) {
    const dx = num('x', x0) - x0
    const dy = num('y', y0) - y0
    given.set('x1', num('x1', x0) + dx); given.set('x2', num('x2', x0) + dx)
    given.set('y1', num('y1', y0) + dy); given.set('y2', num('y2', y0) + dy)
  }
  checked.splice(0, checked.length, ...given)
}

/** Deletes shapes (missing ids are skipped) in one transaction with `origin`; the ids deleted. */
export function deleteShapes (doc: Y.Doc, ids: readonly string[], origin: unknown = null): string[] {
  const shapes = shapesOf(doc)
  const gone: string[] = []
  doc.transact(() => {
    for (const id of ids) if (shapes.has(id)) { shapes.delete(id); gone.push(id) }
  }, origin)
  return gone
}
