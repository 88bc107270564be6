// Shapes of the document schema (docs/document-schema.md) as a client reads them: Yjs maps in, plain typed records out.
// Reading never throws: a shape with missing or mistyped keys gets defaults, and a value that is
// not a shape map is skipped, so one bad record (from a buggy peer or model) cannot break the page.
import * as Y from 'yjs'

/** The page every room has. */
export const MAIN_PAGE = 'page:main'

export { GEO_KINDS } from './vocabulary.js'

/** Keys common to every shape. */
export interface ShapeBase {
  id: string
  pageId: string
  x: number
  y: number
  rotation: number
  index: string
  color: string
  fill: string
  note: string
  locked: boolean
  createdBy: string
}
export interface GeoShape extends ShapeBase { kind: 'geo', type: string, w: number, h: number, text: string, textAlign: string }
export interface TextShape extends ShapeBase { kind: 'text', type: 'text', text: string, fontSize: number, maxWidth: number | null, textAlign: string }
export interface NoteShape extends ShapeBase { kind: 'note', type: 'note', text: string }
export interface LinkShape extends ShapeBase {
  kind: 'link'
  type: 'arrow' | 'line'
  x1: number
  y1: number
  x2: number
  y2: number
  fromId: string | null
  toId: string | null
  bend: number
  text: string
}
export interface DrawShape extends ShapeBase { kind: 'draw', type: 'draw', points: number[] }
export type Shape = GeoShape | TextShape | NoteShape | LinkShape | DrawShape

/** A note's side in page units (tldraw's sticky notes are 200 × 200). */
export const NOTE_SIZE = 200

function num (v: unknown, fallback: number): number {
  if (typeof v === 'number' && Number.isFinite(v)) return v
  if (typeof v === 'string' && v.trim() !== '') {
    const n = Number(v)
    if (Number.isFinite(n)) return n
  }
  return fallback
}
function str (v: unknown, fallback: string): string {
  return typeof v === 'string' ? v : typeof v === 'number' ? String(v) : fallback
}
function optStr (v: unknown): string | null {
  return typeof v === 'string' && v.length > 0 ? v : null
}

/** Reads a flat number list from a `Y.Array`, a plain array, or anything else (empty). */
export function readPoints (v: unknown): number[] {
  const raw: unknown[] = v instanceof Y.Array ? v.toArray() : Array.isArray(v) ? v : []
  // Pairwise, so one bad coordinate drops its point instead of shifting every later x into a y.
  const out: number[] = []
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const x = raw[i]
    const y = raw[i + 1]
    if (typeof x === 'number' && Number.isFinite(x) && typeof y === 'number' && Number.isFinite(y)) out.push(x, y)
  }
  return out
}

/** Reads one shape. `key` is its key in `shapes` (which wins over an inner `id` that disagrees). */
export function readShape (key: string, value: unknown): Shape | null {
  if (!(value instanceof Y.Map)) return null
  return readShapeKeys(key, value as Y.Map<unknown>)
}

/**
 * Reads one shape from its JSON form (the `doc.shapes` of `GET /rooms/{room}/versions/{seq}`):
 * the same keys and defaults as `readShape`; `null` when it is not an object.
 */
export function readShapeJson (key: string, value: unknown): Shape | null {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return null
  const o = value as Record<string, unknown>
  return readShapeKeys(key, { get: k => (Object.prototype.hasOwnProperty.call(o, k) ? o[k] : undefined) })
}

function readShapeKeys (key: string, m: { get: (k: string) => unknown }): Shape {
  const type = str(m.get('type'), 'rectangle')
  const base: ShapeBase = {
    id: key,
    pageId: str(m.get('pageId'), MAIN_PAGE),
    x: num(m.get('x'), 0),
    y: num(m.get('y'), 0),
    rotation: num(m.get('rotation'), 0),
    index: str(m.get('index'), ''),
    color: str(m.get('color'), 'black'),
    fill: str(m.get('fill'), 'none'),
    note: str(m.get('note'), ''),
    locked: m.get('locked') === true,
    createdBy: str(m.get('createdBy'), '')
  }
  const text = str(m.get('text'), '')
  switch (type) {
    case 'text': {
      const maxWidth = m.get('maxWidth')
      return {
        ...base,
        kind: 'text',
        type,
        text,
        fontSize: Math.max(1, num(m.get('fontSize'), 24)),
        maxWidth: maxWidth == null ? null : Math.max(1, num(maxWidth, 300)),
        textAlign: str(m.get('textAlign'), 'start')
      }
    }
    case 'note':
      return { ...base, kind: 'note', type, text }
    case 'arrow':
    case 'line':
      return {
        ...base,
        kind: 'link',
        type,
        x1: num(m.get('x1'), base.x),
        y1: num(m.get('y1'), base.y),
        x2: num(m.get('x2'), base.x + 100),
        y2: num(m.get('y2'), base.y),
        fromId: optStr(m.get('fromId')),
        toId: optStr(m.get('toId')),
        bend: num(m.get('bend'), 0),
        text
      }
    case 'draw':
      return { ...base, kind: 'draw', type, points: readPoints(m.get('points')) }
    default:
      return {
        ...base,
        kind: 'geo',
        type,
        w: Math.max(1, num(m.get('w'), 100)),
        h: Math.max(1, num(m.get('h'), 100)),
        text,
        textAlign: str(m.get('textAlign'), 'middle')
      }
  }
}

/** Reads every shape of `shapes`, skipping entries that are not shape maps. */
export function readShapes (shapes: Y.Map<unknown>): Shape[] {
  const out: Shape[] = []
  shapes.forEach((value, key) => {
    const s = readShape(key, value)
    if (s !== null) out.push(s)
  })
  return out
}
