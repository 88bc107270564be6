// The open benchmark's page (built and driven by e2e/open-bench.mjs, never shipped): tldraw 5 with
// the binding on a local Y.Doc that already holds a large room — the e2e figure's grid of geo
// shapes, every geo kind, 100 a row — so the binding's and tldraw's share of an open is measured
// without a server or a network. Query: `n` (shapes, default 5000), `labels` (`distinct`: `#i`,
// the e2e figure's; `repeat`: 100 distinct words; `none`), `load` (`viewport` or `all`), `slice` (the binding's `sliceMs`),
// `utils=default` (tldraw's own shape utils instead of the binding's). Sets `window.bench` to
// `{ bindMs, shownMs, loadedMs, labelsMs, held, inView }` (milliseconds from the start of the bind, which
// stands for the first sync: the document is complete then), and `window.benchDone`.
import { createRoot } from 'react-dom/client'
import * as Y from 'yjs'
import { Tldraw, type Editor } from 'tldraw'
import { getAssetUrlsByImport } from '@tldraw/assets/imports'
import { GEO_KINDS, MAIN_PAGE, createShape, writePage } from '@fairyring/client'
import { bindTldraw, fairyringShapeUtils, labelsWaiting } from '../src/index.js'
import 'tldraw/tldraw.css'

const q = new URLSearchParams(location.search)
const n = Number(q.get('n') ?? 5000)
const labels = q.get('labels') ?? 'distinct'
const load = q.get('load') === 'all' ? 'all' : 'viewport'
const sliceMs = q.get('slice') !== null ? Number(q.get('slice')) : undefined
const utils = q.get('utils') === 'default' ? [] : fairyringShapeUtils
const w = window as unknown as Record<string, unknown>

const doc = new Y.Doc()
doc.transact(() => {
  writePage(doc, { id: MAIN_PAGE, name: 'Page 1' })
  for (let i = 0; i < n; i++) {
    const text = labels === 'none' ? '' : labels === 'repeat' ? `word ${i % 100}` : `#${i}`
    createShape(doc, { id: `s${i}`, type: GEO_KINDS[i % GEO_KINDS.length] as never, x: (i % 100) * 130, y: Math.floor(i / 100) * 130, w: 100, h: 100, color: 'blue', text })
  }
})

const assetUrls = getAssetUrlsByImport({ baseUrl: new URL('.', location.href).href })
const frames = (k: number): Promise<void> => new Promise(resolve => {
  const step = (left: number): void => { if (left === 0) resolve(); else requestAnimationFrame(() => step(left - 1)) }
  step(k)
})

function onMount (ed: Editor): void {
  w.editor = ed
  // Let tldraw settle its first frames (fonts, the empty page), as the example page does while
  // its socket syncs; `wait=1`: until the driver sets `window.benchGo` (a profiler started).
  const go = (): void => {
    if (q.get('wait') === '1' && w.benchGo !== true) { setTimeout(go, 50); return }
    start()
  }
  setTimeout(go, 300)
  const start = (): void => {
    const t0 = performance.now()
    const binding = bindTldraw(ed, doc, { createdBy: 'user:bench', load, sliceMs })
    const bindMs = performance.now() - t0
    void frames(2).then(() => {
      const shownMs = performance.now() - t0
      const vp = ed.getViewportPageBounds()
      let inView = 0; let missing = 0
      doc.getMap<Y.Map<unknown>>('shapes').forEach((m, id) => {
        const x = m.get('x') as number; const y = m.get('y') as number; const sw = m.get('w') as number; const sh = m.get('h') as number
        if (x <= vp.maxX && x + sw >= vp.minX && y <= vp.maxY && y + sh >= vp.minY) {
          inView++
          if (ed.getShape(`shape:${id}` as never) === undefined) missing++
        }
      })
      const held = ed.getCurrentPageShapeIds().size
      return binding.loaded.then(() => frames(2)).then(async () => {
        const loadedMs = performance.now() - t0
        const all = ed.getCurrentPageShapeIds().size
        // The labels of shapes shown, left for idle time (fairyringShapeUtils): when the last is measured.
        while (labelsWaiting(ed) > 0) await new Promise(resolve => setTimeout(resolve, 20))
        w.bench = { bindMs, shownMs, loadedMs, labelsMs: performance.now() - t0, held, inView, missing, all }
      })
    }).catch(e => { w.bench = { error: String(e) } })
  }
}

const root = document.getElementById('root')
if (root !== null) createRoot(root).render(<Tldraw assetUrls={assetUrls} onMount={onMount} shapeUtils={utils} />)
