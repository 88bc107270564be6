// Document edits. Each exported function is one user gesture and runs as ONE Yjs transaction
// with the caller's local origin, so `Y.UndoManager` (tracking that origin) undoes it as a unit
// and never touches other people's or fairies' changes. Locked shapes (a fairy's action still
// streaming, docs/fairies.md) are never edited here, whatever the UI asked. The writes
// themselves are @fairyring/client's checked writers (only changed keys are written).
import * as Y from 'yjs'
import {
  createShape as writeShape, deleteShapes as removeShapes, keyAbove, keyBelow, readShape, updateShape,
  type ShapeChanges, type ShapeInput, type Shape
} from '@fairyring/client'

/** Property values a new shape may carry (plain data; `points` becomes a Y.Array). */
export type ShapeProps = Record<string, string | number | boolean | null | number[]>

/** The document's root maps (docs/document-schema.md). */
export function roots (doc: Y.Doc): { shapes: Y.Map<unknown>, pages: Y.Map<unknown>, meta: Y.Map<unknown>, fairies: Y.Map<unknown>, tasks: Y.Map<unknown> } {
  return {
    shapes: doc.getMap('shapes'),
    pages: doc.getMap('pages'),
    meta: doc.getMap('meta'),
    fairies: doc.getMap('fairies'),
    tasks: doc.getMap('tasks')
  }
}

/** A fresh shape id: short, readable by fairies, no `shape:` prefix. */
export function newShapeId (kind: string, rand: () => number = Math.random): string {
  const tail = Math.floor(rand() * 36 ** 6).toString(36).padStart(6, '0')
  return `${kind}-${tail}`
}

function shapeMap (shapes: Y.Map<unknown>, id: string): Y.Map<unknown> | null {
  const v = shapes.get(id)
  return v instanceof Y.Map ? (v as Y.Map<unknown>) : null
}

/** The shape stored under `id`, or `null` if absent or not a shape map. */
export function getShape (doc: Y.Doc, id: string): Shape | null {
  return readShape(id, roots(doc).shapes.get(id))
}

function editable (shapes: Y.Map<unknown>, id: string): Y.Map<unknown> | null {
  const m = shapeMap(shapes, id)
  return m !== null && m.get('locked') !== true ? m : null
}

function allIndexes (shapes: Y.Map<unknown>): string[] {
  const out: string[] = []
  shapes.forEach(v => {
    if (v instanceof Y.Map) {
      const i = (v as Y.Map<unknown>).get('index')
      if (typeof i === 'string') out.push(i)
    }
  })
  return out
}

/**
 * Creates a shape on top of the others, authored by `user:SUB`. Returns its id. `props` holds the
 * type-specific keys (`w`, `h`, `text`, `x1`…, `points`); common keys get schema defaults.
 */
export function createShape (doc: Y.Doc, origin: unknown, sub: string, type: string, props: ShapeProps, id = newShapeId(type)): string {
  const input: Record<string, unknown> = { createdBy: `user:${sub}` }
  for (const [k, v] of Object.entries(props)) {
    if (v === null) continue
    input[k] = k === 'points' && Array.isArray(v) ? v.filter(n => Number.isFinite(n)) : v
  }
  return writeShape(doc, { ...input, id, type } as ShapeInput, origin)
}

/** Moves shapes by `(dx, dy)`: `x, y` for all, plus both endpoints of arrows and lines. */
export function moveShapes (doc: Y.Doc, origin: unknown, ids: string[], dx: number, dy: number): void {
  if (!Number.isFinite(dx) || !Number.isFinite(dy) || (dx === 0 && dy === 0)) return
  const { shapes } = roots(doc)
  doc.transact(() => {
    for (const id of ids) {
      const s = readShape(id, editable(shapes, id))
      if (s === null) continue
      // An arrow's or line's `x, y` given alone moves both its ends.
      updateShape(doc, id, { x: s.x + dx, y: s.y + dy }, origin)
    }
  }, origin)
}

/** Sets a geo shape's box (a resize gesture). Other kinds have no `w`/`h` and are left alone. */
export function resizeShape (doc: Y.Doc, origin: unknown, id: string, box: { x: number, y: number, w: number, h: number }): void {
  if (![box.x, box.y, box.w, box.h].every(Number.isFinite) || box.w <= 0 || box.h <= 0) return
  const { shapes } = roots(doc)
  const m = editable(shapes, id)
  if (m === null || readShape(id, m)?.kind !== 'geo') return
  updateShape(doc, id, { x: box.x, y: box.y, w: box.w, h: box.h }, origin)
}

/** Sets one style key (`color` or `fill`) on every editable shape in `ids`. */
export function setStyle (doc: Y.Doc, origin: unknown, ids: string[], key: 'color' | 'fill', value: string): void {
  const { shapes } = roots(doc)
  doc.transact(() => {
    for (const id of ids) if (editable(shapes, id) !== null) updateShape(doc, id, { [key]: value } as ShapeChanges, origin)
  }, origin)
}

/** Replaces a shape's `text`. */
export function setText (doc: Y.Doc, origin: unknown, id: string, text: string): void {
  const { shapes } = roots(doc)
  const m = editable(shapes, id)
  if (m === null) return
  updateShape(doc, id, { text }, origin)
}

/** Deletes every editable shape in `ids`. */
export function deleteShapes (doc: Y.Doc, origin: unknown, ids: string[]): void {
  const { shapes } = roots(doc)
  removeShapes(doc, ids.filter(id => editable(shapes, id) !== null), origin)
}

/** Puts the shapes above (`front`) or below (`back`) all others, keeping their relative order. */
export function reorder (doc: Y.Doc, origin: unknown, ids: string[], where: 'front' | 'back'): void {
  const { shapes } = roots(doc)
  const moving = ids
    .map(id => readShape(id, editable(shapes, id)))
    .filter((s): s is Shape => s !== null)
    .sort((a, b) => (a.index < b.index ? -1 : a.index > b.index ? 1 : a.id < b.id ? -1 : 1))
  if (moving.length === 0) return
  doc.transact(() => {
    if (where === 'front') {
      for (const s of moving) shapeMap(shapes, s.id)?.set('index', keyAbove(allIndexes(shapes)))
    } else {
      for (const s of moving.reverse()) {
        const k = keyBelow(allIndexes(shapes))
        if (k !== null) shapeMap(shapes, s.id)?.set('index', k)
      }
    }
  }, origin)
}

/** An undo manager over `shapes` that only records transactions with `origin` (your own edits). */
export function ownUndoManager (doc: Y.Doc, origin: unknown): Y.UndoManager {
  return new Y.UndoManager(roots(doc).shapes, { trackedOrigins: new Set([origin]), captureTimeout: 0 })
}
