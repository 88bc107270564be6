// The live binding between a tldraw `Editor` and a fairyring room's `Y.Doc`: the document's
// shapes and pages enter tldraw through `store.mergeRemoteChanges` (so tldraw's undo takes back
// only the local person's changes), and the local person's changes (`store.listen`, source
// `user`) are written back key by key with this binding's origin, only the keys whose value
// changed. Presence is `presence.ts`'s. Owns the two directions of sync; the mapping is
// `records.ts`'s.
import * as Y from 'yjs'
import { MAIN_PAGE, NOTE_SIZE, readShape, type Shape } from '@fairyring/client'
import type { Editor, TLPageId, TLRecord, TLShape, TLShapeId, TLPage, TLArrowBinding, TLBinding } from 'tldraw'
import {
  CARRIED_TYPES, bindingId, docBindings, docToPage, docToShape, fromShapeId, intoParent, pageToDoc, shapeToDoc, toShapeId, type DocKeys
} from './records.js'
import { isGhostId } from './review.js'

/** What a binding needs. */
export interface BindingOptions {
  /** `user:SUB` written as `createdBy` on the shapes this person makes. */
  createdBy: string
  /** The origin of this binding's transactions (default: a fresh object). */
  origin?: unknown
  /**
   * How a large room enters tldraw when the binding starts (default `viewport`): the shapes in
   * and around the current viewport at once, then the rest in slices between frames, so the
   * page shows the room without waiting for tldraw to measure and render thousands of shapes
   * (`loaded` says when all are in); `all`: every shape in one step. Rooms of at most
   * {@link LOAD_AT_ONCE} shapes always load in one step.
   */
  load?: 'viewport' | 'all'
  /**
   * Milliseconds of work one slice of the rest aims at (default 500: each slice also costs tldraw
   * a pass over every shape it holds, so fewer, larger slices put a room in sooner).
   */
  sliceMs?: number
}

/** Rooms of at most this many shapes enter tldraw in one step. */
export const LOAD_AT_ONCE = 300
/** Most shapes of the first step of a viewport-first load. */
const FIRST_STEP_MAX = 600

/** A running binding; `dispose()` stops it. */
export interface TldrawBinding {
  /** The origin of the binding's own Yjs transactions (a `Y.UndoManager` could track it). */
  readonly origin: unknown
  /** Resolves once every shape the document held when the binding started is in tldraw. */
  readonly loaded: Promise<void>
  dispose: () => void
}

/** A document shape's box in page coordinates, roughly (rotation ignored): what the first step of a load looks at. */
function roughBox (s: Shape): { x: number, y: number, w: number, h: number } {
  switch (s.kind) {
    case 'geo': return { x: s.x, y: s.y, w: s.w, h: s.h }
    case 'note': return { x: s.x, y: s.y, w: NOTE_SIZE, h: NOTE_SIZE }
    case 'text': return { x: s.x, y: s.y, w: s.maxWidth ?? s.fontSize * Math.max(1, s.text.length) * 0.6, h: s.fontSize * 1.4 }
    case 'link': return { x: Math.min(s.x1, s.x2), y: Math.min(s.y1, s.y2), w: Math.abs(s.x2 - s.x1), h: Math.abs(s.y2 - s.y1) }
    case 'draw': {
      let x0 = 0; let y0 = 0; let x1 = 0; let y1 = 0
      for (let i = 0; i + 1 < s.points.length; i += 2) {
        const px = s.points[i] ?? 0; const py = s.points[i + 1] ?? 0
        x0 = Math.min(x0, px); y0 = Math.min(y0, py); x1 = Math.max(x1, px); y1 = Math.max(y1, py)
      }
      return { x: s.x + x0, y: s.y + y0, w: x1 - x0, h: y1 - y0 }
    }
  }
}

function isCarried (r: TLRecord): r is TLShape {
  return r.typeName === 'shape' && (CARRIED_TYPES as readonly string[]).includes((r as TLShape).type) && !isGhostId(r.id)
}

/**
 * Binds `editor` to `doc` (already synced with the server, or about to be: later remote changes
 * arrive the same way). Returns the running binding.
 */
export function bindTldraw (editor: Editor, doc: Y.Doc, opts: BindingOptions): TldrawBinding {
  const origin = opts.origin ?? { binding: 'fairyring-tldraw' }
  const shapes = doc.getMap<unknown>('shapes')
  const pages = doc.getMap<unknown>('pages')

  const docPageIds = (): Set<string> => {
    const ids = new Set<string>()
    pages.forEach((v, id) => { if (v instanceof Y.Map) ids.add(id) })
    return ids
  }
  const fallbackPage = (): TLPageId => {
    const ids = docPageIds()
    return (ids.has(MAIN_PAGE) ? MAIN_PAGE : [...ids][0] ?? editor.getCurrentPageId()) as TLPageId
  }

  // ---- document → tldraw ----

  /** Records for the given document shape ids (and their arrows' bindings), and what to remove. */
  const applyFromDoc = (shapeIds: Iterable<string>, pageIds: Iterable<string>): void => {
    const puts: TLRecord[] = []
    const removes: Array<TLRecord['id']> = []
    const pageSet = docPageIds()
    for (const id of pageIds) {
      const v = pages.get(id)
      if (v instanceof Y.Map) {
        const name = v.get('name'); const index = v.get('index')
        puts.push(docToPage(id, typeof name === 'string' ? name : id, typeof index === 'string' ? index : ''))
      } else if (editor.store.get(id as TLPageId) !== undefined && pageSet.size > 0) {
        removes.push(id as TLPageId)
      }
    }
    const fb = fallbackPage()
    const arrows: Array<{ id: string, fromId: string | null, toId: string | null }> = []
    for (const id of shapeIds) {
      // A document key that would take a review ghost's id is not drawn (ghosts are review.ts's).
      if (isGhostId(toShapeId(id))) continue
      const v = shapes.get(id)
      const fromDoc = v instanceof Y.Map ? docToShape(editor, id, v as Y.Map<unknown>, pageSet, fb) : null
      const current = editor.store.get(toShapeId(id))
      if (fromDoc === null) {
        if (current !== undefined) removes.push(toShapeId(id))
        continue
      }
      // The document holds page coordinates: a shape this tldraw keeps in a frame or group stays
      // there, at the parent-relative position that draws it where the document says.
      const rec = intoParent(editor, fromDoc, current as TLShape | undefined)
      puts.push(rec)
      if (rec.type === 'arrow' && v instanceof Y.Map) {
        const f = v.get('fromId'); const t = v.get('toId')
        arrows.push({ id, fromId: typeof f === 'string' && f !== '' ? f : null, toId: typeof t === 'string' && t !== '' ? t : null })
      }
    }
    if (puts.length === 0 && removes.length === 0) return
    editor.store.mergeRemoteChanges(() => {
      // Pages first: a shape's parent must exist when it is put.
      const pagePuts = puts.filter(r => r.typeName === 'page')
      if (pagePuts.length > 0) editor.store.put(pagePuts)
      const shapePuts = puts.filter(r => r.typeName !== 'page')
      let batched = false
      try {
        // One put for all (a room's first load: thousands of shapes).
        if (shapePuts.length > 0) editor.store.put(shapePuts)
        batched = true
      } catch { /* one of them is refused: put them one by one */ }
      for (const r of batched ? [] : shapePuts) {
        try {
          editor.store.put([r])
        } catch {
          // A value tldraw's validators refuse (a peer's odd `tl:` key): the shape with its defaults.
          const util = editor.getShapeUtil((r as TLShape).type)
          const withDefaults = { ...r, props: { ...util.getDefaultProps(), ...pickValid(r as TLShape, util.getDefaultProps() as Record<string, unknown>) } }
          try { editor.store.put([withDefaults as TLRecord]) } catch { /* left out */ }
        }
      }
      for (const a of arrows) {
        const want = docBindings(editor, a.id, a.fromId, a.toId)
        for (const terminal of ['start', 'end'] as const) {
          const bid = bindingId(a.id, terminal)
          const has = editor.store.get(bid)
          const w = want.find(b => b.id === bid)
          // Bindings another tldraw made for this arrow (other ids) give way to the document's.
          for (const b of editor.getBindingsFromShape(toShapeId(a.id), 'arrow') as TLArrowBinding[]) {
            if (b.props.terminal === terminal && b.id !== bid) editor.store.remove([b.id])
          }
          if (w !== undefined) editor.store.put([w])
          else if (has !== undefined) editor.store.remove([bid])
        }
      }
      if (removes.length > 0) editor.store.remove(removes.filter(id => editor.store.get(id) !== undefined))
      // The current page must exist.
      if (editor.store.get(editor.getCurrentPageId()) === undefined) {
        const first = editor.getPages()[0]
        if (first !== undefined) editor.setCurrentPage(first.id)
      }
    })
  }

  const pickValid = (r: TLShape, defaults: Record<string, unknown>): Record<string, unknown> => {
    const out: Record<string, unknown> = {}
    const props = r.props as Record<string, unknown>
    for (const k of ['geo', 'w', 'h', 'color', 'fill', 'richText', 'start', 'end', 'points', 'segments']) if (k in defaults && k in props) out[k] = props[k]
    return out
  }

  // The whole document once: pages first, tldraw's own default page dropped while no shape is
  // on the page (switching pages under thousands of shapes is slow), then every shape at once.
  const loadAll = (): void => {
    const pageIds = [...docPageIds()]
    applyFromDoc([], pageIds)
    if (pageIds.length > 0) {
      const extra = editor.getPages().filter(p => !pageIds.includes(p.id)).map(p => p.id)
      editor.store.mergeRemoteChanges(() => {
        if (!pageIds.includes(editor.getCurrentPageId())) editor.setCurrentPage((pageIds.includes(MAIN_PAGE) ? MAIN_PAGE : pageIds[0]) as TLPageId)
        if (extra.length === 0) return
        const onExtra: TLShapeId[] = []
        for (const p of extra) for (const sid of editor.getPageShapeIds(p)) onExtra.push(sid)
        // What a person drew before the first sync moves to the room's page (and is written below).
        if (onExtra.length > 0) editor.moveShapesToPage(onExtra, editor.getCurrentPageId())
        editor.store.remove(extra)
      })
    }
    // What tldraw holds that the document lacks (a shape made before the first sync) is written.
    const missing = editor.getCurrentPageShapes().filter(s => isCarried(s) && !shapes.has(fromShapeId(s.id)))
    const { first, rest } = loadOrder()
    applyFromDoc(first, [])
    if (missing.length > 0) doc.transact(() => { for (const s of missing) writeShape(s, true) }, origin)
    if (rest.length === 0) { finishLoad(); return }
    // The rest in slices, each sized from the cost of the previous ones (tldraw measures each
    // label and renders each shape as it enters), with the page painting between them. A hidden
    // page (timers throttled) takes what is left in one step.
    let pos = 0
    let size = 50
    const slice = (): void => {
      loadTimer = undefined
      if (disposed) return
      const hidden = typeof document !== 'undefined' && document.visibilityState === 'hidden'
      const n = hidden ? rest.length - pos : size
      const t0 = performance.now()
      applyFromDoc(rest.slice(pos, pos + n), [])
      pos += n
      // tldraw renders in a microtask queued by the put: this one runs after it.
      queueMicrotask(() => {
        const per = (performance.now() - t0) / Math.max(1, n)
        // At least a tenth of what is in already: each slice also costs tldraw a pass over
        // every shape it holds (its React list), so slices may not stay small as the room grows.
        size = Math.max(Math.ceil((first.length + pos) / 10), Math.min(2000, Math.round(sliceMs / Math.max(per, 0.005))))
        if (pos < rest.length) loadTimer = setTimeout(slice, 0)
        else finishLoad()
      })
    }
    loadTimer = setTimeout(slice, 0)
  }

  /**
   * The document's shape ids in the order a load puts them: `first` (all of them for a small
   * room or `load: 'all'`; else those of the current page in the viewport and a tenth of it
   * around, with the shapes their arrows point at, up to {@link FIRST_STEP_MAX}) and `rest`
   * (nearest the viewport first; arrows last, so their targets are in tldraw when they come).
   */
  const loadOrder = (): { first: string[], rest: string[] } => {
    const all: string[] = []
    shapes.forEach((_v, id) => all.push(id))
    if ((opts.load ?? 'viewport') === 'all' || all.length <= LOAD_AT_ONCE) return { first: all, rest: [] }
    const vp = editor.getViewportPageBounds()
    // The viewport and a tenth of it around (rough boxes ignore rotation).
    const mx = vp.w / 10; const my = vp.h / 10
    const ax = vp.x - mx; const ay = vp.y - my; const bx = vp.x + vp.w + mx; const by = vp.y + vp.h + my
    const cx = vp.x + vp.w / 2; const cy = vp.y + vp.h / 2
    const page = editor.getCurrentPageId() as string
    const first = new Set<string>()
    const restShapes: Array<{ id: string, d: number }> = []
    const restArrows: string[] = []
    for (const id of all) {
      const s = readShape(id, shapes.get(id))
      if (s === null) continue
      const b = roughBox(s)
      const inView = s.pageId === page && b.x <= bx && b.x + b.w >= ax && b.y <= by && b.y + b.h >= ay
      if (inView && first.size < FIRST_STEP_MAX) {
        first.add(id)
        if (s.kind === 'link') { if (s.fromId !== null) first.add(s.fromId); if (s.toId !== null) first.add(s.toId) }
      } else if (s.kind === 'link') restArrows.push(id)
      else {
        // Nearest the viewport first (other pages after): what a pan shows next is in soonest.
        const d = s.pageId === page ? Math.hypot(b.x + b.w / 2 - cx, b.y + b.h / 2 - cy) : Infinity
        restShapes.push({ id, d })
      }
    }
    restShapes.sort((a, b) => a.d - b.d)
    const rest = [...restShapes.map(r => r.id), ...restArrows].filter(id => !first.has(id))
    return { first: [...first], rest }
  }

  const onShapes = (events: Array<Y.YEvent<Y.AbstractType<unknown>>>, tr: Y.Transaction): void => {
    if (tr.origin === origin) return
    const ids = new Set<string>()
    for (const e of events) {
      if (e.target === shapes) for (const k of (e as Y.YMapEvent<unknown>).keysChanged) ids.add(k)
      else {
        const top = e.path[0]
        if (typeof top === 'string') ids.add(top)
      }
    }
    applyFromDoc(ids, [])
  }
  const onPages = (events: Array<Y.YEvent<Y.AbstractType<unknown>>>, tr: Y.Transaction): void => {
    if (tr.origin === origin) return
    const ids = new Set<string>()
    for (const e of events) {
      if (e.target === pages) for (const k of (e as Y.YMapEvent<unknown>).keysChanged) ids.add(k)
      else if (typeof e.path[0] === 'string') ids.add(e.path[0])
    }
    applyFromDoc([], ids)
  }
  shapes.observeDeep(onShapes)
  pages.observeDeep(onPages)

  // ---- tldraw → document ----

  /** Writes one tldraw shape's keys that differ from the document's. */
  const writeShape = (shape: TLShape, created: boolean): void => {
    const keys = shapeToDoc(editor, shape)
    if (keys === null) return
    const id = fromShapeId(shape.id)
    let m = shapes.get(id)
    if (!(m instanceof Y.Map)) {
      m = new Y.Map<unknown>()
      shapes.set(id, m)
      ;(m as Y.Map<unknown>).set('id', id)
      ;(m as Y.Map<unknown>).set('createdBy', opts.createdBy)
      ;(m as Y.Map<unknown>).set('note', '')
      ;(m as Y.Map<unknown>).set('fill', 'none')
    } else if (created && (m as Y.Map<unknown>).get('createdBy') === undefined) {
      ;(m as Y.Map<unknown>).set('createdBy', opts.createdBy)
    }
    setKeys(m as Y.Map<unknown>, keys)
  }

  /**
   * Writes the local person's changes: `put` the records added or changed (read from the store
   * now; `true` when added), `removed` those removed. Arrows bound to a changed shape, and those
   * whose bindings changed, are written again (their ends move).
   */
  const writeChanges = (put: ReadonlyMap<TLRecord['id'], boolean>, removed: Iterable<TLRecord>): void => {
    const touchedArrows = new Set<TLShapeId>()
    // Carried shapes inside a changed shape (a frame or group that moved or turned): their page
    // position changed with it, though tldraw's records of them did not.
    const moved = new Set<TLShapeId>()
    doc.transact(() => {
      for (const [id, created] of put) {
        const r = editor.store.get(id)
        if (r === undefined) continue
        if (r.typeName === 'shape' && !created && !isGhostId(r.id)) {
          for (const d of editor.getShapeAndDescendantIds([r.id as TLShapeId])) if (d !== r.id && !put.has(d)) moved.add(d)
        }
        if (isCarried(r)) {
          writeShape(r, created)
          // Arrows bound to a moved shape move their ends.
          if (!created) for (const b of editor.getBindingsToShape(r.id, 'arrow')) touchedArrows.add(b.fromId)
        } else if (r.typeName === 'page') writePage(r as TLPage)
        else if (r.typeName === 'binding') touchedArrows.add((r as TLBinding).fromId)
      }
      for (const id of moved) {
        const d = editor.store.get(id)
        if (d === undefined || !isCarried(d)) continue
        writeShape(d, false)
        for (const b of editor.getBindingsToShape(d.id, 'arrow')) touchedArrows.add(b.fromId)
      }
      for (const r of removed) {
        if (editor.store.get(r.id) !== undefined) continue
        if (isCarried(r)) shapes.delete(fromShapeId(r.id))
        else if (r.typeName === 'page') pages.delete(r.id)
        else if (r.typeName === 'binding') touchedArrows.add((r as TLBinding).fromId)
      }
      for (const id of touchedArrows) {
        const a = editor.store.get(id)
        if (a !== undefined && isCarried(a)) writeShape(a, false)
      }
    }, origin)
  }

  // The local person's changes leave as soon as tldraw's operation ends (its store side effects,
  // flushed in a microtask: one Yjs update per task), not at tldraw's next frame, when
  // `store.listen` reports them: a change reaches the other pages a frame or more sooner. The
  // listener stays as the net for a change made with side effects off; what the side effects
  // already wrote it skips.
  const pendingPut = new Map<TLRecord['id'], boolean>()
  const pendingRemoved = new Map<TLRecord['id'], TLRecord>()
  let flushQueued = false
  let written = new Set<TLRecord['id']>()
  const flush = (): void => {
    flushQueued = false
    if (disposed || (pendingPut.size === 0 && pendingRemoved.size === 0)) return
    const put = new Map(pendingPut); const removed = [...pendingRemoved.values()]
    pendingPut.clear(); pendingRemoved.clear()
    for (const id of put.keys()) written.add(id)
    for (const r of removed) written.add(r.id)
    writeChanges(put, removed)
  }
  const queueFlush = (): void => {
    if (flushQueued) return
    flushQueued = true
    queueMicrotask(flush)
  }
  const WATCHED = new Set(['shape', 'page', 'binding'])
  const onPut = (r: TLRecord, source: 'user' | 'remote', created: boolean): void => {
    if (source !== 'user' || !WATCHED.has(r.typeName)) return
    pendingRemoved.delete(r.id)
    pendingPut.set(r.id, (pendingPut.get(r.id) ?? false) || created)
    queueFlush()
  }
  const onRemove = (r: TLRecord, source: 'user' | 'remote'): void => {
    if (source !== 'user' || !WATCHED.has(r.typeName)) return
    pendingPut.delete(r.id)
    pendingRemoved.set(r.id, r)
    queueFlush()
  }
  type Source = 'user' | 'remote'
  const effects = editor.sideEffects as unknown as {
    registerAfterCreateHandler: (type: string, fn: (r: TLRecord, source: Source) => void) => () => void
    registerAfterChangeHandler: (type: string, fn: (prev: TLRecord, next: TLRecord, source: Source) => void) => () => void
    registerAfterDeleteHandler: (type: string, fn: (r: TLRecord, source: Source) => void) => () => void
  }
  const stopEffects: Array<() => void> = []
  for (const type of WATCHED) {
    stopEffects.push(effects.registerAfterCreateHandler(type, (r, source) => { onPut(r, source, true) }))
    stopEffects.push(effects.registerAfterChangeHandler(type, (_prev, next, source) => { onPut(next, source, false) }))
    stopEffects.push(effects.registerAfterDeleteHandler(type, (r, source) => { onRemove(r, source) }))
  }

  const onStore = (entry: { changes: { added: Record<string, TLRecord>, updated: Record<string, [TLRecord, TLRecord]>, removed: Record<string, TLRecord> } }): void => {
    flush()
    const { added, updated, removed } = entry.changes
    const done = written
    written = new Set()
    const put = new Map<TLRecord['id'], boolean>()
    for (const r of Object.values(added)) if (!done.has(r.id)) put.set(r.id, true)
    for (const [, r] of Object.values(updated)) if (!done.has(r.id) && !put.has(r.id)) put.set(r.id, false)
    const gone = Object.values(removed).filter(r => !done.has(r.id))
    if (put.size > 0 || gone.length > 0) writeChanges(put, gone)
  }

  const writePage = (page: TLPage): void => {
    const want = pageToDoc(page)
    let m = pages.get(page.id)
    if (!(m instanceof Y.Map)) { m = new Y.Map<unknown>(); pages.set(page.id, m) }
    const mm = m as Y.Map<unknown>
    if (mm.get('name') !== want.name) mm.set('name', want.name)
    if (mm.get('index') !== want.index) mm.set('index', want.index)
  }

  const sliceMs = opts.sliceMs ?? 500
  let disposed = false
  let loadTimer: ReturnType<typeof setTimeout> | undefined
  let finishLoad: () => void = () => {}
  const loaded = new Promise<void>(resolve => { finishLoad = resolve })
  loadAll()
  const stopListening = editor.store.listen(onStore as never, { source: 'user', scope: 'document' })
  return {
    origin,
    loaded,
    dispose: () => {
      disposed = true
      clearTimeout(loadTimer)
      for (const stop of stopEffects) stop()
      stopListening()
      shapes.unobserveDeep(onShapes)
      pages.unobserveDeep(onPages)
    }
  }
}

/** Sets the keys whose value differs (`undefined` removes a key); a list becomes a `Y.Array` for `points`. */
export function setKeys (m: Y.Map<unknown>, keys: DocKeys): void {
  for (const [k, v] of Object.entries(keys)) {
    const cur = m.get(k)
    if (v === undefined || (v === null && (k === 'fromId' || k === 'toId' || k === 'maxWidth'))) {
      if (m.has(k)) m.delete(k)
      continue
    }
    if (k === 'points' && Array.isArray(v)) {
      const now = cur instanceof Y.Array ? cur.toArray() : null
      if (now !== null && now.length === v.length && now.every((n, i) => n === v[i])) continue
      const arr = new Y.Array<number>()
      arr.push(v as number[])
      m.set(k, arr)
      continue
    }
    if (cur === v) continue
    if (typeof v === 'object' && v !== null && JSON.stringify(cur) === JSON.stringify(v)) continue
    m.set(k, v)
  }
}
