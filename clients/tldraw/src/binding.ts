// The live binding between a tldraw `Editor` and a fairyring room's `Y.Doc`: the document's
// shapes and pages enter tldraw through `store.mergeRemoteChanges` (so tldraw's undo takes back
// only the local person's changes), and the local person's changes (`store.listen`, source
// `user`) are written back key by key with this binding's origin, only the keys whose value
// changed. Presence is `presence.ts`'s. Owns the two directions of sync; the mapping is
// `records.ts`'s.
import * as Y from 'yjs'
import { MAIN_PAGE } from '@fairyring/client'
import type { Editor, TLPageId, TLRecord, TLShape, TLShapeId, TLPage, TLArrowBinding, TLBinding } from 'tldraw'
import {
  CARRIED_TYPES, bindingId, docBindings, docToPage, docToShape, fromShapeId, pageToDoc, shapeToDoc, toShapeId, type DocKeys
} from './records.js'

/** What a binding needs. */
export interface BindingOptions {
  /** `user:SUB` written as `createdBy` on the shapes this person makes. */
  createdBy: string
  /** The origin of this binding's transactions (default: a fresh object). */
  origin?: unknown
}

/** A running binding; `dispose()` stops it. */
export interface TldrawBinding {
  /** The origin of the binding's own Yjs transactions (a `Y.UndoManager` could track it). */
  readonly origin: unknown
  dispose: () => void
}

function isCarried (r: TLRecord): r is TLShape {
  return r.typeName === 'shape' && (CARRIED_TYPES as readonly string[]).includes((r as TLShape).type)
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
      const v = shapes.get(id)
      const rec = v instanceof Y.Map ? docToShape(editor, id, v as Y.Map<unknown>, pageSet, fb) : null
      if (rec === null) {
        if (editor.store.get(toShapeId(id)) !== undefined) removes.push(toShapeId(id))
        continue
      }
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
    const shapeIds: string[] = []
    shapes.forEach((_v, id) => shapeIds.push(id))
    applyFromDoc(shapeIds, [])
    // What tldraw holds that the document lacks (a shape made before the first sync) is written.
    const missing = editor.getCurrentPageShapes().filter(s => isCarried(s) && !shapes.has(fromShapeId(s.id)))
    if (missing.length > 0) doc.transact(() => { for (const s of missing) writeShape(s, true) }, origin)
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

  const onStore = (entry: { changes: { added: Record<string, TLRecord>, updated: Record<string, [TLRecord, TLRecord]>, removed: Record<string, TLRecord> } }): void => {
    const { added, updated, removed } = entry.changes
    const touchedArrows = new Set<TLShapeId>()
    doc.transact(() => {
      for (const r of Object.values(added)) {
        if (isCarried(r)) writeShape(r, true)
        else if (r.typeName === 'page') writePage(r as TLPage)
        else if (r.typeName === 'binding') touchedArrows.add((r as TLBinding).fromId)
      }
      for (const [, r] of Object.values(updated)) {
        if (isCarried(r)) {
          writeShape(r, false)
          // Arrows bound to a moved shape move their ends.
          for (const b of editor.getBindingsToShape(r.id, 'arrow')) touchedArrows.add(b.fromId)
        } else if (r.typeName === 'page') writePage(r as TLPage)
        else if (r.typeName === 'binding') touchedArrows.add((r as TLBinding).fromId)
      }
      for (const r of Object.values(removed)) {
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

  const writePage = (page: TLPage): void => {
    const want = pageToDoc(page)
    let m = pages.get(page.id)
    if (!(m instanceof Y.Map)) { m = new Y.Map<unknown>(); pages.set(page.id, m) }
    const mm = m as Y.Map<unknown>
    if (mm.get('name') !== want.name) mm.set('name', want.name)
    if (mm.get('index') !== want.index) mm.set('index', want.index)
  }

  loadAll()
  const stopListening = editor.store.listen(onStore as never, { source: 'user', scope: 'document' })
  return {
    origin,
    dispose: () => {
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
