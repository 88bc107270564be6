// tldraw's shape utils for the types the binding carries, made fast to open a large room with,
// registered by the page that binds (`<Tldraw shapeUtils={fairyringShapeUtils}>`): the same
// shapes, drawn and edited the same way, with two changes.
// (1) A shape off the screen is not rendered until it is first on screen (or selected, or
// edited): tldraw mounts every shape of the page and hides those off screen (its shape wrapper
// still does).
// (2) A geo shape's label is measured once the shape is first shown, in batches of one layout
// pass each, with HTML made from one cached TipTap schema; tldraw alone builds the schema and
// forces a layout for every label of every shape put, inside `store.put` (its spatial index asks
// every new shape's geometry, which holds the label's box). Until then the geometry holds a rough
// label box (only the label's hit area: a shape's bounds leave its label out) and waits on a
// signal that rebuilds it once the label is measured — a few labels in a microtask, many in the
// page's idle time. Every other question about a label's size (a person's edit growing the shape,
// a resize) is tldraw's own exact answer, at once.
// Owns nothing of the document; the mapping is records.ts's, the sync binding.ts's.
import React, { useEffect, useState } from 'react'
import { getSchema, type Extensions } from '@tiptap/core'
import { DOMSerializer, Node as PMNode, type Schema } from '@tiptap/pm/model'
import {
  ArrowShapeUtil, DrawShapeUtil, GeoShapeUtil, LineShapeUtil, NoteShapeUtil, TextShapeUtil, atom, getDisplayValues, react, tipTapDefaultExtensions, transact, useStateTracking,
  type Atom, type Editor, type TLArrowShape, type TLDrawShape, type TLGeoShape, type TLLineShape, type TLNoteShape, type TLRichText, type TLShape,
  type TLTextShape
} from 'tldraw'

/** A measured label: tldraw's unscaled label size (the text's box and the label's padding). */
interface Size { w: number, h: number }

/** The display values a geo label is measured with (tldraw's `GeoShapeUtilDisplayValues`, in part). */
interface LabelValues {
  labelFontFamily: string
  labelFontSize: number
  labelLineHeight: number
  labelMinWidth: number
  labelExtraPadding: number
  labelPadding: number
}

/** Most labels one editor keeps per rich text object (the widths of a shape resized). */
const PER_TEXT_MAX = 256

function isEmptyRich (rich: TLRichText): boolean {
  const content = rich.content
  if (content.length === 0) return true
  if (content.length === 1) {
    const node = content[0] as { content?: unknown[] } | undefined
    if (node?.content === undefined || node.content.length === 0) return true
  }
  return false
}

/** The measuring styles of a geo shape's label, as tldraw's own measurement sets them. */
interface LabelOpts { key: string, dv: LabelValues, maxWidth: number, opts: Record<string, unknown> }
const optsCache = new WeakMap<TLGeoShape, { theme: unknown, o: LabelOpts }>()
function labelOpts (util: GeoShapeUtil, shape: TLGeoShape): LabelOpts {
  const theme = util.editor.getCurrentTheme()
  const cached = optsCache.get(shape)
  if (cached?.theme === theme) return cached.o
  const dv = getDisplayValues(util as never, shape) as unknown as LabelValues
  const maxWidth = Math.max(0, Math.ceil(dv.labelMinWidth + dv.labelExtraPadding), Math.ceil(shape.props.w / shape.props.scale - dv.labelPadding * 2))
  const opts = {
    fontWeight: 'normal',
    fontVariant: 'normal',
    fontStyle: 'normal',
    padding: '0px',
    fontFamily: dv.labelFontFamily,
    fontSize: dv.labelFontSize,
    lineHeight: dv.labelLineHeight,
    minWidth: dv.labelMinWidth,
    maxWidth
  }
  const o = { key: `${dv.labelFontFamily}|${dv.labelFontSize}|${dv.labelLineHeight}|${dv.labelMinWidth}|${maxWidth}|${dv.labelPadding}`, dv, maxWidth, opts }
  optsCache.set(shape, { theme, o })
  return o
}

const schemas = new WeakMap<Extensions, { schema: Schema, serializer: DOMSerializer }>()
let scratch: HTMLElement | null = null

/**
 * The HTML tldraw measures a label with (`renderHtmlFromRichTextForMeasurement`), made with one
 * ProseMirror schema per extension list instead of one per call (TipTap's `generateHTML`);
 * `null` when the rich text does not fit the schema.
 */
export function labelHtml (editor: Editor, rich: TLRichText): string | null {
  const extensions = editor.getTextOptions().tipTapConfig?.extensions ?? tipTapDefaultExtensions
  let s = schemas.get(extensions)
  if (s === undefined) {
    const schema = getSchema(extensions)
    s = { schema, serializer: DOMSerializer.fromSchema(schema) }
    schemas.set(extensions, s)
  }
  try {
    const node = PMNode.fromJSON(s.schema, rich)
    scratch ??= document.implementation.createHTMLDocument().createElement('div')
    scratch.replaceChildren(s.serializer.serializeFragment(node.content, { document: scratch.ownerDocument }))
    const html = scratch.innerHTML.replace(/<p([^>]*)><\/p>/g, '<p$1><br /></p>')
    scratch.replaceChildren()
    return `<div class="tl-rich-text">${html}</div>`
  } catch {
    return null
  }
}

/** Labels measured in one layout pass of idle time. */
const BATCH = 32
/** Labels waiting that are measured in a microtask rather than in idle time. */
const AT_ONCE = 64
/** The longest labels wait for idle time before a batch is measured anyway. */
const IDLE_WAIT_MS = 2000
/**
 * A label asked for by a geometry: what to measure it with, its size once measured (none after
 * that when the schema refused its rich text: tldraw measures it), and the signal the geometry waits on.
 */
interface Entry { rich: TLRichText, key: string, padding: number, opts: Record<string, unknown>, size?: Size, done: Atom<boolean>, queued: boolean }

/**
 * One editor's labels: by rich text object, then by the styles they are measured with; and the
 * queue of those not measured yet.
 */
class LabelSizes {
  entries = new WeakMap<TLRichText, Map<string, Entry>>()
  queue: Entry[] = []
  /** Shapes that have been shown, and the label entry of each shape not shown yet. */
  shownIds = new Set<TLShape['id']>()
  parked = new Map<TLShape['id'], Entry>()
  scheduled = false
  constructor (readonly editor: Editor) {}

  get (rich: TLRichText, key: string): Entry | undefined {
    return this.entries.get(rich)?.get(key)
  }

  /**
   * The entry of this label for shape `id`: queued for measuring when the shape has been shown,
   * else kept for the shape until it is ({@link shown}).
   */
  ask (id: TLShape['id'], rich: TLRichText, key: string, padding: number, opts: Record<string, unknown>): Entry {
    let forText = this.entries.get(rich)
    if (forText === undefined) { forText = new Map(); this.entries.set(rich, forText) }
    let e = forText.get(key)
    if (e === undefined) {
      // A text measured at many widths (a shape resized): the oldest measured entries go.
      if (forText.size >= PER_TEXT_MAX) {
        for (const [k, old] of forText) {
          if (forText.size < PER_TEXT_MAX / 2) break
          if (old.done.__unsafe__getWithoutCapture()) forText.delete(k)
        }
      }
      e = { rich, key, padding, opts, done: atom('fairyring label measured', false), queued: false }
      forText.set(key, e)
    }
    if (!e.queued && !e.done.__unsafe__getWithoutCapture()) {
      if (this.shownIds.has(id)) this.enqueue(e)
      else this.parked.set(id, e)
    }
    return e
  }

  /** Shape `id` is on screen (or selected, or edited) for the first time: its label is measured. */
  shown (id: TLShape['id']): void {
    this.shownIds.add(id)
    const e = this.parked.get(id)
    if (e === undefined) return
    this.parked.delete(id)
    if (!e.queued && !e.done.__unsafe__getWithoutCapture()) this.enqueue(e)
  }

  enqueue (e: Entry): void {
    e.queued = true
    this.queue.push(e)
    this.schedule()
  }

  /** A few labels are measured in a microtask; many in the page's idle time, a batch at a time. */
  schedule (): void {
    if (this.scheduled || this.queue.length === 0) return
    this.scheduled = true
    if (this.queue.length <= AT_ONCE || typeof requestIdleCallback === 'undefined') {
      queueMicrotask(() => this.run(null))
    } else {
      requestIdleCallback(d => this.run(d), { timeout: IDLE_WAIT_MS })
    }
  }

  run (deadline: IdleDeadline | null): void {
    this.scheduled = false
    // More came in since the microtask was queued (a large put): they wait for idle time.
    if (deadline === null && this.queue.length > AT_ONCE && typeof requestIdleCallback !== 'undefined') {
      this.scheduled = true
      requestIdleCallback(d => this.run(d), { timeout: IDLE_WAIT_MS })
      return
    }
    let measured = 0
    while (this.queue.length > 0) {
      // Idle time: a batch while the frame leaves time for one (or one when the wait ran out).
      if (deadline !== null && !deadline.didTimeout && deadline.timeRemaining() < 8) break
      const part = this.queue.splice(0, deadline === null ? this.queue.length : BATCH)
      this.measure(part)
      measured += part.length
      if (deadline?.didTimeout === true) break
    }
    // tldraw keeps one measuring element per label of its last batch in the page: one is left.
    if (measured > 1) this.editor.textMeasure.measureHtmlBatch([{ html: '', opts: { fontFamily: 'sans-serif', fontSize: 12, lineHeight: 1, fontWeight: 'normal', fontStyle: 'normal', padding: '0px' } as never }])
    this.schedule()
  }

  /** Measures these labels in one layout pass and wakes the geometries waiting on them. */
  measure (part: Entry[]): void {
    const asked: Array<{ e: Entry, html: string }> = []
    for (const e of part) {
      const html = labelHtml(this.editor, e.rich)
      if (html !== null) asked.push({ e, html })
    }
    const got = asked.length > 0 ? this.editor.textMeasure.measureHtmlBatch(asked.map(a => ({ html: a.html, opts: a.e.opts as never }))) : []
    asked.forEach((a, j) => {
      const m = got[j]
      if (m !== undefined) a.e.size = { w: m.w + a.e.padding * 2, h: m.h + a.e.padding * 2 }
    })
    transact(() => { for (const e of part) e.done.set(true) })
  }
}

const labelSizes = new WeakMap<Editor, LabelSizes>()
function sizesOf (editor: Editor): LabelSizes {
  let l = labelSizes.get(editor)
  if (l === undefined) { l = new LabelSizes(editor); labelSizes.set(editor, l) }
  return l
}

/**
 * The size this editor's batches measured for a geo shape's label (`undefined`: not measured by
 * them, or not a {@link FairyringGeoShapeUtil}); tldraw's own measurement gives the same.
 */
export function measuredLabelSize (editor: Editor, shape: TLGeoShape): Size | undefined {
  const util = editor.getShapeUtil('geo')
  if (!(util instanceof FairyringGeoShapeUtil)) return undefined
  return labelSizes.get(editor)?.get(shape.props.richText, labelOpts(util, shape).key)?.size
}

/** How many labels of shapes already shown wait to be measured (many are left for idle time). */
export function labelsWaiting (editor: Editor): number {
  return labelSizes.get(editor)?.queue.length ?? 0
}

/** A label's size before it is measured: its characters at the font size, on as many lines as it has. */
function roughSize (rich: TLRichText, fontSize: number, lineHeight: number, maxWidth: number, padding: number): Size {
  const lines: number[] = []
  const walk = (n: { text?: unknown, content?: unknown[], type?: unknown }, top: boolean): void => {
    if (top) lines.push(0)
    if (typeof n.text === 'string') lines[lines.length - 1] = (lines[lines.length - 1] ?? 0) + n.text.length
    for (const c of n.content ?? []) walk(c as never, false)
  }
  for (const block of rich.content ?? []) walk(block as never, true)
  let h = 0; let w = 0
  for (const chars of lines) {
    const lw = chars * fontSize * 0.6
    w = Math.max(w, Math.min(lw, maxWidth))
    h += Math.max(1, Math.ceil(lw / Math.max(1, maxWidth))) * fontSize * lineHeight
  }
  return { w: w + padding * 2, h: Math.max(h, fontSize * lineHeight) + padding * 2 }
}

/** Set while tldraw builds a geo shape's geometry (where a label size may be rough for a moment). */
let inGeometry = 0

/**
 * Renders `render()` (a shape util's component) once the shape has been on screen, selected or
 * edited (tldraw's culling says so), with tldraw's own signal tracking; until then nothing.
 */
function OnceShown ({ editor, id, render }: { editor: Editor, id: TLShape['id'], render: () => React.ReactNode }): React.ReactNode {
  const [shown, setShown] = useState(() => !editor.getCulledShapes().has(id))
  useEffect(() => {
    if (shown) { sizesOf(editor).shown(id); return }
    return react('fairyring: shape first shown', () => { if (!editor.getCulledShapes().has(id)) setShown(true) })
  }, [editor, id, shown])
  return shown ? React.createElement(Tracked, { render }) : null
}

function Tracked ({ render }: { render: () => React.ReactNode }): React.ReactNode {
  return useStateTracking('fairyring: shape', render)
}

/** A shape util's component for `shape`, rendered once the shape is first shown (with the shape as the store holds it then). */
function onceShown<S extends TLShape> (editor: Editor, shape: S, component: (s: S) => React.ReactNode): React.JSX.Element {
  const render = (): React.ReactNode => component(editor.store.unsafeGetWithoutCapture(shape.id) as S ?? shape)
  return React.createElement(OnceShown, { editor, id: shape.id, render })
}

type GeoPrivate = { getUnscaledLabelSize: (shape: TLGeoShape) => Size }
const tldrawLabelSize = (GeoShapeUtil.prototype as unknown as Partial<GeoPrivate>).getUnscaledLabelSize

/**
 * tldraw's geo shape util, with labels measured in batches and shapes off screen rendered once
 * first shown (see the top of this file). Everything else is tldraw's.
 */
export class FairyringGeoShapeUtil extends GeoShapeUtil {
  override component (shape: TLGeoShape): React.JSX.Element {
    return onceShown(this.editor, shape, s => super.component(s))
  }

  override getGeometry (shape: TLGeoShape): ReturnType<GeoShapeUtil['getGeometry']> {
    inGeometry++
    try {
      return super.getGeometry(shape)
    } finally {
      inGeometry--
    }
  }
}

/** tldraw's question "how big is this shape's label" (private in its types), answered as above. */
function labelSize (this: FairyringGeoShapeUtil, shape: TLGeoShape): Size {
  const exact = (): Size => (tldrawLabelSize as (s: TLGeoShape) => Size).call(this, shape)
  const rich = shape.props.richText
  // Outside a geometry (a person's edit growing the shape, a resize): tldraw's own, at once.
  if (inGeometry === 0 || isEmptyRich(rich)) return exact()
  const { key, dv, maxWidth, opts } = labelOpts(this, shape)
  const e = sizesOf(this.editor).ask(shape.id, rich, key, dv.labelPadding, opts)
  // Reading the signal rebuilds this geometry once the label is measured.
  if (!e.done.get()) return roughSize(rich, dv.labelFontSize, dv.labelLineHeight, maxWidth, dv.labelPadding)
  return e.size ?? exact()
}

if (tldrawLabelSize !== undefined) {
  Object.defineProperty(FairyringGeoShapeUtil.prototype, 'getUnscaledLabelSize', { configurable: true, writable: true, value: labelSize })
}

/** tldraw's note shape util, rendered once first shown. */
export class FairyringNoteShapeUtil extends NoteShapeUtil {
  override component (shape: TLNoteShape): React.JSX.Element { return onceShown(this.editor, shape, s => super.component(s)) }
}
/** tldraw's text shape util, rendered once first shown. */
export class FairyringTextShapeUtil extends TextShapeUtil {
  override component (shape: TLTextShape): React.JSX.Element { return onceShown(this.editor, shape, s => super.component(s)) }
}
/** tldraw's arrow shape util, rendered once first shown. */
export class FairyringArrowShapeUtil extends ArrowShapeUtil {
  override component (shape: TLArrowShape): React.JSX.Element { return onceShown(this.editor, shape, s => super.component(s)) }
}
/** tldraw's line shape util, rendered once first shown. */
export class FairyringLineShapeUtil extends LineShapeUtil {
  override component (shape: TLLineShape): React.JSX.Element { return onceShown(this.editor, shape, s => super.component(s)) }
}
/** tldraw's draw shape util, rendered once first shown. */
export class FairyringDrawShapeUtil extends DrawShapeUtil {
  override component (shape: TLDrawShape): React.JSX.Element { return onceShown(this.editor, shape, s => super.component(s)) }
}

/**
 * The shape utils to give `<Tldraw shapeUtils>` (or the editor) on a bound page: tldraw's own
 * for the types the binding carries, each rendered once first shown, geo labels measured in batches.
 */
export const fairyringShapeUtils = [
  FairyringGeoShapeUtil, FairyringNoteShapeUtil, FairyringTextShapeUtil, FairyringArrowShapeUtil, FairyringLineShapeUtil, FairyringDrawShapeUtil
] as const
