// tldraw records ↔ the document schema's keys, one property to one key both ways: a shape's
// Y.Map keys become a tldraw shape record (`docToShape`), and a tldraw shape becomes the keys
// to write (`shapeToDoc`), so the binding writes only the keys whose value changed and two
// people editing two properties of one shape both keep their edit. What the schema has no key
// for is kept under `tl:PROP` (only when it differs from tldraw's default), a rich text the plain
// `text` cannot hold under `tl:richText`, a pen's exact segments under `tl:segments`, a line's
// extra points under `tl:points`. Pages map to `{name, index}`. Carries geo (every geo kind of
// the schema), text, note, arrow (with its bindings), line and draw; other tldraw shapes stay local.
import * as Y from 'yjs'
import { readShape, readShapeJson, GEO_KINDS, type Shape } from '@fairyring/client'
import {
  b64Vecs, getArrowInfo, toRichText, type Editor, type TLShape, type TLShapeId, type TLPageId, type TLRecord, type TLArrowBinding,
  type TLBindingId, type TLRichText, type TLPage, type JsonObject
} from 'tldraw'
import {
  TL_LINE_POINTS, TL_META, TL_OPACITY, TL_RICH_TEXT, TL_SEGMENTS, fromTldrawIndex, plainHolds, plainText, richFrom,
  tlKey, toTldrawIndex, TL_PREFIX
} from './keys.js'

/** tldraw shape types the binding carries. */
export const CARRIED_TYPES = ['geo', 'text', 'note', 'arrow', 'line', 'draw'] as const
/** A value of a document key as the binding writes it (JSON; `points` a flat number list). */
export type DocValue = string | number | boolean | null | number[] | Record<string, unknown> | unknown[]
/** The keys of one shape to write to the document; `undefined` removes the key. */
export type DocKeys = Record<string, DocValue | undefined>

/** tldraw's text sizes (`FONT_SIZES` × the theme's 16 px). */
const SIZE_PX: Record<string, number> = { s: 18, m: 24, l: 36, xl: 44 }
const ALIGNS = new Set(['start', 'middle', 'end'])
const FILLS = new Set(['none', 'semi', 'solid', 'pattern'])

/** The tldraw id of a document shape id, and back. */
export const toShapeId = (id: string): TLShapeId => `shape:${id}` as TLShapeId
export const fromShapeId = (id: string): string => id.startsWith('shape:') ? id.slice(6) : id

/** Props each tldraw type maps onto schema keys (the rest go to `tl:PROP`). */
const MAPPED: Record<string, ReadonlySet<string>> = {
  geo: new Set(['geo', 'w', 'h', 'color', 'fill', 'richText', 'align']),
  text: new Set(['color', 'richText', 'textAlign', 'size', 'scale', 'autoSize', 'w']),
  note: new Set(['color', 'richText']),
  arrow: new Set(['start', 'end', 'bend', 'richText', 'color', 'fill']),
  line: new Set(['points', 'color']),
  draw: new Set(['segments', 'color', 'fill'])
}

const defaultsCache = new WeakMap<Editor, Map<string, Record<string, unknown>>>()

/** A shape util's default props, once per editor and type. */
function defaultProps (editor: Editor, type: string): Record<string, unknown> {
  let byType = defaultsCache.get(editor)
  if (byType === undefined) { byType = new Map(); defaultsCache.set(editor, byType) }
  let d = byType.get(type)
  if (d === undefined) { d = editor.getShapeUtil(type as never).getDefaultProps() as Record<string, unknown>; byType.set(type, d) }
  return d
}

function same (a: unknown, b: unknown): boolean {
  return a === b || JSON.stringify(a) === JSON.stringify(b)
}



/** The tldraw type of a schema shape. */
function tlType (s: Shape): string {
  if (s.kind === 'geo') return 'geo'
  if (s.kind === 'link') return s.type
  return s.type
}

/**
 * The tldraw shape record for a document shape, its `Y.Map` or its keys as plain data (`null`
 * when it is not a shape of a carried type).
 * tldraw-only props come from `tl:PROP` keys over the shape util's defaults; a value tldraw's
 * validators refuse falls back to the default when the record is put.
 */
export function docToShape (editor: Editor, id: string, m: Y.Map<unknown> | Readonly<Record<string, unknown>>, pageIds: ReadonlySet<string>, fallbackPage: TLPageId): TLShape | null {
  const isMap = m instanceof Y.Map
  const shape = isMap ? readShape(id, m) : readShapeJson(id, m)
  if (shape === null) return null
  const type = tlType(shape)
  if (!(CARRIED_TYPES as readonly string[]).includes(type)) return null
  const kept = (k: string): unknown => isMap ? (m as Y.Map<unknown>).get(k) : (Object.prototype.hasOwnProperty.call(m, k) ? (m as Record<string, unknown>)[k] : undefined)
  const defaults = defaultProps(editor, type)
  const props: Record<string, unknown> = { ...defaults }
  for (const k of isMap ? (m as Y.Map<unknown>).keys() : Object.keys(m)) {
    if (!k.startsWith(TL_PREFIX)) continue
    const prop = k.slice(TL_PREFIX.length)
    if (prop in defaults && !MAPPED[type]?.has(prop)) props[prop] = kept(k)
  }
  let x = shape.x; let y = shape.y; let rotation = shape.rotation
  switch (shape.kind) {
    case 'geo':
      props.geo = (GEO_KINDS as readonly string[]).includes(shape.type) ? shape.type : 'rectangle'
      props.w = Math.max(1, shape.w); props.h = Math.max(1, shape.h)
      props.color = shape.color; props.fill = tlFill(shape.fill, kept(tlKey('fill')))
      props.richText = richFrom(shape.text, kept(TL_RICH_TEXT))
      props.align = alignFrom(shape.textAlign, kept(tlKey('align')), ['start-legacy', 'middle-legacy', 'end-legacy'])
      break
    case 'text': {
      const keptSize = kept(tlKey('size'))
      const size = typeof keptSize === 'string' && keptSize in SIZE_PX ? keptSize : nearestSize(shape.fontSize)
      props.size = size
      props.scale = shape.fontSize / (SIZE_PX[size] ?? 24)
      props.color = shape.color
      props.richText = richFrom(shape.text, kept(TL_RICH_TEXT))
      props.textAlign = ALIGNS.has(shape.textAlign) ? shape.textAlign : 'start'
      props.autoSize = shape.maxWidth === null
      const keptW = kept(tlKey('w'))
      props.w = shape.maxWidth !== null ? Math.max(1, shape.maxWidth / (props.scale as number)) : (typeof keptW === 'number' && keptW > 0 ? keptW : defaults.w)
      break
    }
    case 'note':
      props.color = shape.color
      props.richText = richFrom(shape.text, kept(TL_RICH_TEXT))
      break
    case 'link':
      if (shape.type === 'arrow') {
        x = shape.x1; y = shape.y1; rotation = 0
        props.start = { x: 0, y: 0 }
        props.end = { x: shape.x2 - shape.x1, y: shape.y2 - shape.y1 }
        props.bend = shape.bend
        props.richText = richFrom(shape.text, kept(TL_RICH_TEXT))
        props.color = shape.color; props.fill = tlFill(shape.fill, kept(tlKey('fill')))
      } else {
        x = shape.x1; y = shape.y1; rotation = 0
        props.color = shape.color
        props.points = linePoints(shape.x2 - shape.x1, shape.y2 - shape.y1, kept(TL_LINE_POINTS))
      }
      break
    case 'draw':
      props.color = shape.color; props.fill = tlFill(shape.fill, kept(tlKey('fill')))
      props.segments = drawSegments(shape.points, kept(TL_SEGMENTS))
      break
  }
  const opacity = kept(TL_OPACITY)
  const meta = kept(TL_META)
  return {
    id: toShapeId(id),
    typeName: 'shape',
    type,
    x, y, rotation,
    index: toTldrawIndex(shape.index),
    parentId: (pageIds.has(shape.pageId) ? shape.pageId : fallbackPage) as TLPageId,
    isLocked: shape.locked,
    opacity: typeof opacity === 'number' && opacity >= 0 && opacity <= 1 ? opacity : 1,
    meta: typeof meta === 'object' && meta !== null && !Array.isArray(meta) ? meta as JsonObject : {},
    props
  } as unknown as TLShape
}

/**
 * A record from {@link docToShape} (page coordinates, the page as parent) placed under the frame
 * or group that holds the shape in this tldraw (`current`, the record tldraw holds now), when that
 * parent is still on the shape's page: its page position and rotation become the parent's local
 * ones, so tldraw draws it where the document says. Otherwise the record as it is (a page child).
 * Frames and groups are not in the document: only this tldraw knows the shape is inside one.
 */
export function intoParent (editor: Editor, rec: TLShape, current: TLShape | undefined): TLShape {
  const parentId = current?.parentId
  if (parentId === undefined || !String(parentId).startsWith('shape:')) return rec
  const parent = editor.store.get(parentId as TLShapeId)
  if (parent === undefined || editor.getAncestorPageId(parent as TLShape) !== rec.parentId) return rec
  const pt = editor.getShapePageTransform(parentId as TLShapeId)
  const local = pt.clone().invert().applyToPoint({ x: rec.x, y: rec.y })
  return { ...rec, parentId, x: local.x, y: local.y, rotation: rec.rotation - pt.rotation() } as TLShape
}

function tlFill (fill: string, kept: unknown): string {
  if (fill === 'solid' && (kept === 'fill' || kept === 'lined-fill')) return kept
  return FILLS.has(fill) ? fill : 'none'
}

function alignFrom (align: string, kept: unknown, extra: readonly string[]): string {
  if (typeof kept === 'string' && extra.includes(kept) && kept.startsWith(align)) return kept
  return ALIGNS.has(align) ? align : 'middle'
}

function nearestSize (px: number): string {
  let best = 'm'
  for (const [k, v] of Object.entries(SIZE_PX)) if (Math.abs(v - px) < Math.abs((SIZE_PX[best] ?? 24) - px)) best = k
  return best
}

function linePoints (dx: number, dy: number, kept: unknown): Record<string, { id: string, index: string, x: number, y: number }> {
  if (typeof kept === 'object' && kept !== null) {
    const pts = Object.values(kept as Record<string, { id: string, index: string, x: number, y: number }>).sort((a, b) => (a.index < b.index ? -1 : 1))
    const first = pts[0]; const last = pts[pts.length - 1]
    if (pts.length >= 2 && first !== undefined && last !== undefined && first.x === 0 && first.y === 0 && same(last.x, dx) && same(last.y, dy)) return kept as never
  }
  return { a1: { id: 'a1', index: 'a1', x: 0, y: 0 }, a2: { id: 'a2', index: 'a2', x: dx, y: dy } }
}

function segmentPoints (segments: unknown): number[] {
  const out: number[] = []
  if (!Array.isArray(segments)) return out
  for (const seg of segments as Array<{ path?: unknown, dim?: unknown }>) {
    if (typeof seg?.path !== 'string') continue
    try {
      for (const p of b64Vecs.decodePoints(seg.path, seg.dim as never)) out.push(p.x, p.y)
    } catch { /* a malformed path is skipped */ }
  }
  return out
}

function drawSegments (points: number[], kept: unknown): unknown[] {
  if (Array.isArray(kept) && same(segmentPoints(kept).map(round), points.map(round))) return kept
  const vecs: Array<{ x: number, y: number, z: number }> = []
  for (let i = 0; i + 1 < points.length; i += 2) vecs.push({ x: points[i] ?? 0, y: points[i + 1] ?? 0, z: 0.5 })
  if (vecs.length === 0) vecs.push({ x: 0, y: 0, z: 0.5 })
  return [{ type: 'free', path: b64Vecs.encodePoints(vecs) }]
}

const round = (n: number): number => Math.round(n * 100) / 100

/**
 * The document keys of a tldraw shape (every schema key it maps, `tl:PROP` for what differs from
 * tldraw's defaults, `undefined` for a `tl:` key to remove); `null` for a type the binding does not
 * carry. `pageOf` gives the page a shape is on.
 */
export function shapeToDoc (editor: Editor, shape: TLShape): DocKeys | null {
  const type = shape.type
  if (!(CARRIED_TYPES as readonly string[]).includes(type)) return null
  const defaults = defaultProps(editor, type)
  const props = shape.props as Record<string, unknown>
  const out: DocKeys = {}
  for (const [prop, def] of Object.entries(defaults)) {
    if (MAPPED[type]?.has(prop)) continue
    out[tlKey(prop)] = same(props[prop], def) ? undefined : props[prop] as DocValue
  }
  const pageId = editor.getAncestorPageId(shape) ?? editor.getCurrentPageId()
  out.pageId = pageId
  out.index = fromTldrawIndex(shape.index)
  out.locked = shape.isLocked
  out[TL_OPACITY] = shape.opacity === 1 ? undefined : shape.opacity
  out[TL_META] = Object.keys(shape.meta).length === 0 ? undefined : shape.meta as Record<string, unknown>
  // Page coordinates: the schema has no parents, so a shape inside a tldraw frame or group is
  // written where it is drawn on the page (its parent's transform applied), as other clients draw it.
  const t = editor.getShapePageTransform(shape.id)
  const origin = t.point()
  const pageRotation = t.rotation()
  out.x = origin.x; out.y = origin.y
  out.rotation = pageRotation
  const rich = (r: unknown): void => {
    const text = r as TLRichText
    out.text = plainText(text)
    out[TL_RICH_TEXT] = plainHolds(text) ? undefined : text as unknown as Record<string, unknown>
  }
  switch (type) {
    case 'geo': {
      out.type = String(props.geo)
      out.w = props.w as number; out.h = props.h as number
      out.color = props.color as string
      out.fill = FILLS.has(props.fill as string) ? props.fill as string : 'solid'
      out[tlKey('fill')] = FILLS.has(props.fill as string) ? undefined : props.fill as string
      rich(props.richText)
      const align = String(props.align)
      out.textAlign = align.replace('-legacy', '')
      out[tlKey('align')] = ALIGNS.has(align) ? undefined : align
      break
    }
    case 'text': {
      out.type = 'text'
      const size = String(props.size)
      const scale = props.scale as number
      out.fontSize = (SIZE_PX[size] ?? 24) * scale
      out[tlKey('size')] = size === nearestSize(out.fontSize) ? undefined : size
      out.color = props.color as string
      rich(props.richText)
      out.textAlign = String(props.textAlign)
      out.maxWidth = props.autoSize === true ? null : (props.w as number) * scale
      out[tlKey('w')] = props.autoSize === true ? props.w as number : undefined
      break
    }
    case 'note':
      out.type = 'note'
      out.color = props.color as string
      rich(props.richText)
      break
    case 'arrow': {
      out.type = 'arrow'
      const ends = arrowEnds(editor, shape)
      out.x1 = ends.x1; out.y1 = ends.y1; out.x2 = ends.x2; out.y2 = ends.y2
      out.x = Math.min(ends.x1, ends.x2); out.y = Math.min(ends.y1, ends.y2)
      out.rotation = 0
      out.bend = props.bend as number
      out.color = props.color as string
      out.fill = FILLS.has(props.fill as string) ? props.fill as string : 'solid'
      out[tlKey('fill')] = FILLS.has(props.fill as string) ? undefined : props.fill as string
      rich(props.richText)
      const { start, end } = arrowTargets(editor, shape)
      out.fromId = start
      out.toId = end
      break
    }
    case 'line': {
      out.type = 'line'
      const pts = Object.values(props.points as Record<string, { index: string, x: number, y: number }>).sort((a, b) => (a.index < b.index ? -1 : 1))
      const first = pts[0] ?? { x: 0, y: 0 }; const last = pts[pts.length - 1] ?? first
      const a = t.applyToPoint(first); const b = t.applyToPoint(last)
      out.x1 = a.x; out.y1 = a.y; out.x2 = b.x; out.y2 = b.y
      out.x = Math.min(out.x1, out.x2); out.y = Math.min(out.y1, out.y2)
      out.rotation = 0
      const plain = pts.length === 2 && first.x === 0 && first.y === 0 && Math.abs(pageRotation) < 1e-9
      out[TL_LINE_POINTS] = plain ? undefined : props.points as Record<string, unknown>
      out.color = props.color as string
      out.fromId = null; out.toId = null
      break
    }
    case 'draw': {
      out.type = 'draw'
      const pts = segmentPoints(props.segments)
      out.points = pts.length > 4000 ? pts.slice(0, 4000) : pts
      const simple = drawSegments(out.points as number[], null)
      out[TL_SEGMENTS] = same(simple, props.segments) ? undefined : props.segments as unknown[]
      out.color = props.color as string
      out.fill = FILLS.has(props.fill as string) ? props.fill as string : 'solid'
      break
    }
  }
  return out
}

/** An arrow's two ends in page coordinates (bound ends where tldraw draws them). */
function arrowEnds (editor: Editor, shape: TLShape): { x1: number, y1: number, x2: number, y2: number } {
  const props = shape.props as { start: { x: number, y: number }, end: { x: number, y: number } }
  let start = props.start; let end = props.end
  try {
    const info = getArrowInfo(editor, shape as never)
    if (info !== undefined) { start = info.start.point; end = info.end.point }
  } catch { /* not measurable yet: the props are the ends */ }
  const t = editor.getShapePageTransform(shape.id)
  const a = t.applyToPoint(start); const b = t.applyToPoint(end)
  return { x1: a.x, y1: a.y, x2: b.x, y2: b.y }
}

/** The document ids an arrow is bound to, at its start and end (`null`: free). */
function arrowTargets (editor: Editor, shape: TLShape): { start: string | null, end: string | null } {
  let start: string | null = null; let end: string | null = null
  for (const b of editor.getBindingsFromShape(shape.id, 'arrow') as TLArrowBinding[]) {
    if (b.props.terminal === 'start') start = fromShapeId(b.toId)
    else end = fromShapeId(b.toId)
  }
  return { start, end }
}

/** The binding record id of an arrow's terminal. */
export function bindingId (arrowId: string, terminal: 'start' | 'end'): TLBindingId {
  return `binding:${arrowId}-${terminal}` as TLBindingId
}

/** The tldraw arrow bindings a document arrow asks for (targets that are in the store). */
export function docBindings (editor: Editor, arrowId: string, fromId: string | null, toId: string | null): TLArrowBinding[] {
  const util = editor.getBindingUtil('arrow')
  const defaults = util.getDefaultProps() as Record<string, unknown>
  const out: TLArrowBinding[] = []
  for (const [terminal, target] of [['start', fromId], ['end', toId]] as const) {
    if (target === null || editor.store.get(toShapeId(target)) === undefined) continue
    out.push({
      id: bindingId(arrowId, terminal),
      typeName: 'binding',
      type: 'arrow',
      fromId: toShapeId(arrowId),
      toId: toShapeId(target),
      meta: {},
      props: { ...defaults, terminal, normalizedAnchor: { x: 0.5, y: 0.5 }, isExact: false, isPrecise: false }
    } as unknown as TLArrowBinding)
  }
  return out
}

/** A tldraw page record for a document page. */
export function docToPage (id: string, name: string, index: string): TLPage {
  return { id: id as TLPageId, typeName: 'page', name, index: toTldrawIndex(index), meta: {} } as TLPage
}

/** The document keys of a tldraw page. */
export function pageToDoc (page: TLPage): { name: string, index: string } {
  return { name: page.name, index: fromTldrawIndex(page.index) }
}

export type { TLRecord }
export { toRichText }
