// The canvas controller: owns the camera, the current tool, our selection and the gesture in
// progress; turns pointer and keyboard input into `ops` calls (one transaction per gesture), and
// redraws the SVG from the document and awareness. It never writes the document except via `ops`.
// Pending suggestions are drawn as ghosts (`ghosts.ts`): a click selects one, its ✓ / ✗ go to
// the page's `onDecide` (the review routes); they never become shapes here.
// The keyboard reaches shapes by a roving focus on the SVG (`keyboard.ts` orders them): Tab and
// the arrow keys move it, Enter selects (Shift+Enter adds), Enter on the selected shape edits it.
import * as Y from 'yjs'
import type { Awareness } from 'y-protocols/awareness'
import * as ops from './ops.js'
import { readShapes, MAIN_PAGE, NOTE_SIZE, type Shape } from '@fairyring/client'
import { compareZ } from '@fairyring/client'
import {
  boxContains, boxFromCorners, boxesOverlap, resizeBox, screenToPage, shapeBounds, visibleBox, zoomAt,
  type Camera, type Point
} from './geometry.js'
import { renderDefs } from './render.js'
import { strokeFromPage, type FairySprite } from './overlay.js'
import { readPeers, type LocalUser } from '@fairyring/client'
import { drawFairies, drawScene, type Gesture, type Layers } from './scene.js'
import { glide } from './fairies.js'
import { ghosts, readSuggestions, shapeKeys, type Suggestion } from '@fairyring/client'
import { CLICK_SLOP, isGeoTool, toolForKey } from './tools.js'
import { toDom } from './vnode.js'
import { focusDescription, focusOrder, stepFocus } from './keyboard.js'

/** Shortest interval between two cursor updates sent to the others (about 30 per second). */
const CURSOR_MS = 33

/** What the page knows about fairies beyond their awareness state (from the document and the panels). */
export interface FairyLook {
  hats: ReadonlyMap<string, string>
  colors: ReadonlyMap<string, string | null>
  selected: ReadonlySet<string>
  /** Display names by id (fairies and people), for task frame labels. */
  names: ReadonlyMap<string, string>
  /** Each fairy's own colour (its list dot), project or not: what the history panel colours its rows with. */
  own: ReadonlyMap<string, string>
}

/** Whether a key press belongs to a text field (then no canvas shortcut may fire). */
export function isTypingTarget (t: EventTarget | null): boolean {
  if (typeof HTMLElement === 'undefined' || !(t instanceof HTMLElement)) return false
  return t instanceof HTMLInputElement || t instanceof HTMLTextAreaElement || t instanceof HTMLSelectElement || t.isContentEditable
}

/** Whether Enter or Space on this target belongs to it (a button, a link, a focusable list row), not to the canvas. */
export function isControlTarget (t: EventTarget | null): boolean {
  if (typeof HTMLElement === 'undefined' || !(t instanceof HTMLElement)) return false
  return t instanceof HTMLButtonElement || t instanceof HTMLAnchorElement || t.hasAttribute('tabindex')
}


/** What the page gives the canvas: the shared document, presence, and hooks for the side panels. */
export interface CanvasDeps {
  doc: Y.Doc
  awareness: Awareness
  user: LocalUser
  svg: SVGSVGElement
  textEditor: HTMLTextAreaElement
  /** Called when the tool or the selection changes (toolbar and style panel highlight). */
  onUiChange: () => void
  /** Short notices ("that shape is still being drawn by a fairy"). */
  toast: (msg: string) => void
  /** Hats, project colours, selection and names for the fairy sprites and task frames. */
  fairyLook: () => FairyLook
  /** A click on a fairy's sprite (`additive` with Shift). */
  onFairyClick: (id: string, additive: boolean) => void
  /** Called after each frame is drawn (the history preview follows the camera). */
  onRender?: () => void
  /** A ✓ or ✗ on a suggestion's ghost: resolves once the server answered (errors are the page's to show). */
  onDecide: (id: string, decision: 'accept' | 'reject') => Promise<void>
  /** Elements that may lie over the canvas's side (the sidebar on a small screen): bubbles and ✓/✗ keep out from under them. */
  covers?: () => Element[]
}

export class Canvas {
  readonly origin = { local: 'user-edits' }
  readonly undo: Y.UndoManager
  tool = 'select'
  style = { color: 'black', fill: 'none' }
  selection: string[] = []
  cam: Camera = { x: 0, y: 0, zoom: 1 }
  private gesture: Gesture | null = null
  private cursor: Point | null = null
  private spaceHeld = false
  private renderQueued = false
  private cursorSentAt = 0
  private cursorTimer: ReturnType<typeof setTimeout> | undefined
  private lastClick: { id: string, at: number, p: Point } | null = null
  private editing: { id: string | null, at: Point, type: 'text' | 'edit' } | null = null
  private readonly layers: Layers
  private shapes: Shape[] = []
  private byId = new Map<string, Shape>()
  private suggestions: Suggestion[] = []
  /** The ghost selected (its buttons stay shown) and the one under the pointer. */
  ghostSelected: string | null = null
  private ghostHovered: string | null = null
  /** Suggestions whose decision is on its way to the server. */
  private deciding = new Set<string>()
  /** Where each fairy sprite is drawn now (it glides towards its awareness position). */
  private spritePos = new Map<string, Point>()
  private spriteAt = 0
  private glideQueued = false
  private focused: string | null = null
  /** The shape the keyboard's roving focus is on (drawn with a ring while the canvas has focus; the canvas's `data-focused-shape` at once). */
  get focusedShape (): string | null { return this.focused }
  set focusedShape (id: string | null) {
    this.focused = id
    if (id !== null) this.d.svg.dataset.focusedShape = id
    else delete this.d.svg.dataset.focusedShape
  }

  constructor (private readonly d: CanvasDeps) {
    this.undo = ops.ownUndoManager(d.doc, this.origin)
    const svg = d.svg
    svg.replaceChildren(toDom(renderDefs()))
    const mk = (id: string, parent: Element): SVGGElement => {
      const g = document.createElementNS('http://www.w3.org/2000/svg', 'g')
      g.id = id
      parent.appendChild(g)
      return g
    }
    const world = mk('world', svg)
    this.layers = {
      world,
      tasks: mk('layer-tasks', world),
      shapes: mk('layer-shapes', world),
      suggestions: mk('layer-suggestions', world),
      overlay: mk('layer-overlay', world),
      fairies: mk('layer-fairies', world),
      cursors: mk('layer-cursors', svg)
    }
    const { shapes, tasks } = ops.roots(d.doc)
    shapes.observeDeep(() => { this.reloadShapes(); this.scheduleRender() })
    tasks.observeDeep(() => this.scheduleRender())
    d.doc.getMap('suggestions').observeDeep(() => { this.reloadSuggestions(); this.scheduleRender() })
    d.awareness.on('change', () => this.scheduleRender())
    this.undo.on('stack-item-popped', () => { this.pruneSelection(); this.d.onUiChange() })
    this.bindInput()
    this.reloadShapes()
    this.reloadSuggestions()
    this.publishViewport()
    this.scheduleRender()
  }

  // ---- state --------------------------------------------------------------------------------

  private reloadShapes (): void {
    this.shapes = readShapes(ops.roots(this.d.doc).shapes).filter(s => s.pageId === MAIN_PAGE).sort(compareZ)
    this.byId = new Map(this.shapes.map(s => [s.id, s]))
    this.pruneSelection()
  }

  private reloadSuggestions (): void {
    this.suggestions = readSuggestions(this.d.doc.getMap('suggestions'))
    const pending = new Set(this.suggestions.filter(s => s.status === 'pending').map(s => s.id))
    if (this.ghostSelected !== null && !pending.has(this.ghostSelected)) this.ghostSelected = null
    if (this.ghostHovered !== null && !pending.has(this.ghostHovered)) this.ghostHovered = null
  }

  /** Selects the ghost of suggestion `id` (`null`: none); a ghost and shapes are never selected together. */
  selectGhost (id: string | null): void {
    if (id !== null && this.selection.length > 0) this.select([])
    if (this.ghostSelected === id) return
    this.ghostSelected = id
    this.scheduleRender()
  }

  /** Accepts or rejects a suggestion (one call at a time per suggestion). */
  decide (id: string, decision: 'accept' | 'reject'): void {
    if (this.deciding.has(id)) return
    this.deciding.add(id)
    this.scheduleRender()
    this.d.onDecide(id, decision).finally(() => {
      this.deciding.delete(id)
      this.scheduleRender()
    })
  }

  private pruneSelection (): void {
    const kept = this.selection.filter(id => this.byId.has(id))
    if (kept.length !== this.selection.length) this.select(kept)
  }

  /** Selects `ids` (locked shapes are dropped) and tells the others. */
  select (ids: string[]): void {
    this.selection = ids.filter(id => this.byId.get(id)?.locked === false)
    // The keyboard goes on from what was last selected (by mouse or key): Enter then edits it.
    const last = this.selection[this.selection.length - 1]
    if (last !== undefined) this.focusedShape = last
    this.d.awareness.setLocalStateField('selection', this.selection)
    this.d.onUiChange()
    this.scheduleRender()
  }

  setTool (tool: string): void {
    this.commitTextEditor()
    this.tool = tool
    this.d.svg.dataset.activeTool = tool
    this.d.onUiChange()
  }

  setCamera (cam: Camera): void {
    this.cam = cam
    this.publishViewport()
    this.scheduleRender()
  }

  /** How many shapes the main page has now. */
  shapeCount (): number { return this.shapes.length }

  /** The page area this browser shows now (sent with a prompt as its `bounds`). */
  viewportBox (): { x: number, y: number, w: number, h: number } {
    const r = this.d.svg.getBoundingClientRect()
    return visibleBox(this.cam, r.width, r.height)
  }

  /**
   * The page area a person can see now: {@link viewportBox} less a strip covered by an element
   * lying over the canvas's left or right side (`covers`: the sidebar open over a narrow canvas).
   * Speech bubbles and review buttons stay inside it.
   */
  visibleViewBox (): { x: number, y: number, w: number, h: number } {
    const r = this.d.svg.getBoundingClientRect()
    let left = r.left; let right = r.right
    for (const el of this.d.covers?.() ?? []) {
      const c = el.getBoundingClientRect()
      // Only what lies over the canvas, top to bottom.
      if (c.width === 0 || c.right <= left || c.left >= right || c.top > r.top + 1 || c.bottom < r.bottom - 1) continue
      if (c.left + c.width / 2 > (left + right) / 2) right = Math.min(right, c.left)
      else left = Math.max(left, c.right)
    }
    const v = visibleBox(this.cam, r.width, r.height)
    return { x: v.x + (left - r.left) / this.cam.zoom, y: v.y, w: Math.max(0, right - left) / this.cam.zoom, h: v.h }
  }

  private publishViewport (): void {
    const v = this.viewportBox()
    this.d.awareness.setLocalStateField('viewport', { x: Math.round(v.x), y: Math.round(v.y), w: Math.round(v.w), h: Math.round(v.h) })
  }

  /**
   * Sends our cursor at most every `CURSOR_MS` (each awareness change is one network message),
   * always ending with the latest position.
   */
  private publishCursor (): void {
    const send = (): void => {
      this.cursorTimer = undefined
      this.cursorSentAt = performance.now()
      const c = this.cursor
      this.d.awareness.setLocalStateField('cursor', c === null ? null : { x: Math.round(c.x), y: Math.round(c.y) })
    }
    const wait = CURSOR_MS - (performance.now() - this.cursorSentAt)
    if (wait <= 0) send()
    else if (this.cursorTimer === undefined) this.cursorTimer = setTimeout(send, wait)
  }

  // ---- commands (toolbar and keys) ----------------------------------------------------------

  applyStyle (key: 'color' | 'fill', value: string): void {
    this.style[key] = value
    if (this.selection.length > 0) ops.setStyle(this.d.doc, this.origin, this.selection, key, value)
    this.d.onUiChange()
  }

  deleteSelection (): void {
    if (this.selection.length === 0) return
    ops.deleteShapes(this.d.doc, this.origin, this.selection)
    this.select([])
  }

  reorderSelection (where: 'front' | 'back'): void {
    ops.reorder(this.d.doc, this.origin, this.selection, where)
  }

  undoOwn (): void { this.undo.undo() }
  redoOwn (): void { this.undo.redo() }

  zoomBy (factor: number): void {
    const r = this.d.svg.getBoundingClientRect()
    this.setCamera(zoomAt(this.cam, { x: r.width / 2, y: r.height / 2 }, this.cam.zoom * factor))
  }

  resetZoom (): void { this.setCamera({ x: 0, y: 0, zoom: 1 }) }

  // ---- input --------------------------------------------------------------------------------

  private screenPoint (e: { clientX: number, clientY: number }): Point {
    const r = this.d.svg.getBoundingClientRect()
    return { x: e.clientX - r.left, y: e.clientY - r.top }
  }

  private pagePoint (e: { clientX: number, clientY: number }): Point {
    return screenToPage(this.cam, this.screenPoint(e))
  }

  private shapeAt (target: EventTarget | null): Shape | null {
    const el = target instanceof Element ? target.closest('[data-shape-id]') : null
    const id = el?.getAttribute('data-shape-id')
    return id != null ? this.byId.get(id) ?? null : null
  }

  /** The topmost shape whose bounds contain `p` (for arrow bindings). */
  private shapeUnder (p: Point, except: string | null = null): Shape | null {
    for (let i = this.shapes.length - 1; i >= 0; i--) {
      const s = this.shapes[i]
      if (s !== undefined && s.id !== except && s.kind !== 'link' && boxContains(shapeBounds(s), p)) return s
    }
    return null
  }

  private bindInput (): void {
    const svg = this.d.svg
    svg.addEventListener('pointerdown', e => this.onPointerDown(e))
    svg.addEventListener('pointermove', e => this.onPointerMove(e))
    svg.addEventListener('pointerup', e => this.onPointerUp(e))
    svg.addEventListener('pointercancel', () => { this.gesture = null; this.scheduleRender() })
    svg.addEventListener('pointerleave', () => {
      this.cursor = null
      this.publishCursor()
      if (this.ghostHovered !== null) { this.ghostHovered = null; this.scheduleRender() }
    })
    svg.addEventListener('wheel', e => this.onWheel(e), { passive: false })
    svg.tabIndex = 0
    svg.addEventListener('focus', () => {
      if (this.focusedShape === null || !this.byId.has(this.focusedShape)) {
        this.focusedShape = this.selection[0] ?? focusOrder(this.shapes)[0] ?? null
      }
      this.revealFocused()
      this.scheduleRender()
    })
    svg.addEventListener('blur', () => this.scheduleRender())
    window.addEventListener('keydown', e => this.onKeyDown(e))
    window.addEventListener('keyup', e => { if (e.code === 'Space') this.spaceHeld = false })
    window.addEventListener('resize', () => { this.publishViewport(); this.scheduleRender() })
    const ed = this.d.textEditor
    ed.addEventListener('keydown', e => {
      e.stopPropagation()
      if (e.key === 'Escape') { this.closeTextEditor(); return }
      if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) { e.preventDefault(); this.commitTextEditor() }
    })
    ed.addEventListener('blur', () => this.commitTextEditor())
  }

  private onPointerDown (e: PointerEvent): void {
    if (this.editing !== null) this.commitTextEditor()
    const target = e.target instanceof Element ? e.target : null
    const fairy = target?.closest('[data-fairy]')?.getAttribute('data-fairy')
    if (fairy != null && e.button === 0 && !this.spaceHeld && this.tool !== 'hand') {
      this.d.onFairyClick(fairy, e.shiftKey)
      return
    }
    const ghost = target?.closest('[data-suggestion]')?.getAttribute('data-suggestion')
    if (ghost != null && e.button === 0 && !this.spaceHeld && this.tool !== 'hand') {
      const action = target?.closest('[data-suggestion-action]')?.getAttribute('data-suggestion-action')
      if (action === 'accept' || action === 'reject') {
        e.preventDefault()
        this.decide(ghost, action)
        return
      }
      // Other tools draw over a ghost as over empty canvas.
      if (this.tool === 'select') {
        e.preventDefault()
        this.selectGhost(ghost)
        return
      }
    }
    if (this.ghostSelected !== null) this.selectGhost(null)
    const p = this.pagePoint(e)
    if (e.button === 1 || this.tool === 'hand' || this.spaceHeld) {
      this.gesture = { kind: 'pan', startScreen: this.screenPoint(e), startCam: this.cam }
    } else if (e.button !== 0) {
      return
    } else if (this.tool === 'select') {
      this.startSelectGesture(e, p)
    } else if (isGeoTool(this.tool)) {
      this.gesture = { kind: 'create-geo', start: p, end: p, type: this.tool }
    } else if (this.tool === 'arrow' || this.tool === 'line') {
      this.gesture = { kind: 'create-link', start: p, end: p, type: this.tool }
    } else if (this.tool === 'draw') {
      this.gesture = { kind: 'draw', points: [p] }
    } else if (this.tool === 'text') {
      this.openTextEditor(null, p)
      return
    } else if (this.tool === 'note') {
      const id = ops.createShape(this.d.doc, this.origin, this.d.user.id, 'note', {
        x: p.x - NOTE_SIZE / 2, y: p.y - NOTE_SIZE / 2, color: this.style.color === 'black' ? 'yellow' : this.style.color, text: ''
      })
      this.reloadShapes()
      this.setTool('select')
      this.select([id])
      this.openTextEditor(id, { x: p.x - NOTE_SIZE / 2, y: p.y - NOTE_SIZE / 2 })
      return
    }
    this.d.svg.setPointerCapture(e.pointerId)
    e.preventDefault()
  }

  private startSelectGesture (e: PointerEvent, p: Point): void {
    const target = e.target instanceof Element ? e.target : null
    if (target?.getAttribute('data-handle') === 'resize') {
      const id = this.selection[0]
      const s = id !== undefined ? this.byId.get(id) : undefined
      if (s !== undefined && s.kind === 'geo') {
        const box = shapeBounds(s)
        this.gesture = { kind: 'resize', start: p, id: s.id, box, preview: box }
      }
      return
    }
    const hit = this.shapeAt(e.target)
    if (hit === null) {
      if (!e.shiftKey) this.select([])
      this.gesture = { kind: 'brush', start: p, box: { x: p.x, y: p.y, w: 0, h: 0 } }
      return
    }
    this.focusedShape = hit.id
    if (hit.locked) {
      this.d.toast('A fairy is still drawing that shape: it can be edited once it is done.')
      return
    }
    const now = performance.now()
    const last = this.lastClick
    this.lastClick = { id: hit.id, at: now, p }
    if (last !== null && last.id === hit.id && now - last.at < 400 && Math.hypot(p.x - last.p.x, p.y - last.p.y) < 6) {
      this.lastClick = null
      this.openTextEditor(hit.id, { x: hit.x, y: hit.y })
      return
    }
    if (e.shiftKey) {
      this.select(this.selection.includes(hit.id) ? this.selection.filter(i => i !== hit.id) : [...this.selection, hit.id])
    } else if (!this.selection.includes(hit.id)) {
      this.select([hit.id])
    }
    if (this.selection.includes(hit.id)) this.gesture = { kind: 'move', start: p, ids: [...this.selection], dx: 0, dy: 0 }
  }

  private onPointerMove (e: PointerEvent): void {
    // Hover shows a ghost's buttons; tracked here too, since each frame redraws the ghosts.
    const hovered = e.target instanceof Element ? e.target.closest('[data-suggestion]')?.getAttribute('data-suggestion') ?? null : null
    if (hovered !== this.ghostHovered) { this.ghostHovered = hovered; this.scheduleRender() }
    const p = this.pagePoint(e)
    this.cursor = p
    this.publishCursor()
    const g = this.gesture
    if (g === null) return
    switch (g.kind) {
      case 'pan': {
        const s = this.screenPoint(e)
        this.cam = { ...g.startCam, x: g.startCam.x - (s.x - g.startScreen.x) / this.cam.zoom, y: g.startCam.y - (s.y - g.startScreen.y) / this.cam.zoom }
        break
      }
      case 'move': g.dx = p.x - g.start.x; g.dy = p.y - g.start.y; break
      case 'resize': g.preview = resizeBox(g.box, p.x - g.start.x, p.y - g.start.y); break
      case 'brush': g.box = boxFromCorners(g.start, p); break
      case 'create-geo': case 'create-link': g.end = p; break
      case 'draw': g.points.push(p); break
    }
    this.scheduleRender()
  }

  private onPointerUp (e: PointerEvent): void {
    const g = this.gesture
    this.gesture = null
    if (g === null) return
    const p = this.pagePoint(e)
    const clickSlop = CLICK_SLOP / this.cam.zoom
    const { doc } = this.d
    const { color, fill } = this.style
    switch (g.kind) {
      case 'pan': this.publishViewport(); break
      case 'move':
        ops.moveShapes(doc, this.origin, g.ids, p.x - g.start.x, p.y - g.start.y)
        break
      case 'resize':
        ops.resizeShape(doc, this.origin, g.id, resizeBox(g.box, p.x - g.start.x, p.y - g.start.y))
        break
      case 'brush': {
        const box = boxFromCorners(g.start, p)
        if (box.w > clickSlop || box.h > clickSlop) {
          this.select(this.shapes.filter(s => !s.locked && boxesOverlap(shapeBounds(s), box)).map(s => s.id))
        }
        break
      }
      case 'create-geo': {
        let box = boxFromCorners(g.start, p)
        if (box.w < clickSlop && box.h < clickSlop) box = { x: p.x - 50, y: p.y - 50, w: 100, h: 100 }
        const id = ops.createShape(doc, this.origin, this.d.user.id, g.type, {
          x: box.x, y: box.y, w: Math.max(1, box.w), h: Math.max(1, box.h), color, fill, text: '', textAlign: 'middle'
        })
        this.afterCreate(id)
        break
      }
      case 'create-link': {
        let end = p
        if (Math.hypot(end.x - g.start.x, end.y - g.start.y) < clickSlop) end = { x: g.start.x + 150, y: g.start.y }
        const from = this.shapeUnder(g.start)
        const to = this.shapeUnder(end, from?.id ?? null)
        const id = ops.createShape(doc, this.origin, this.d.user.id, g.type, {
          x: g.start.x, y: g.start.y, x1: g.start.x, y1: g.start.y, x2: end.x, y2: end.y,
          fromId: from?.id ?? null, toId: to?.id ?? null, bend: 0, text: '', color
        })
        this.afterCreate(id)
        break
      }
      case 'draw': {
        const stroke = strokeFromPage(g.points)
        if (stroke !== null) {
          const id = ops.createShape(doc, this.origin, this.d.user.id, 'draw', { x: stroke.x, y: stroke.y, points: stroke.points, color })
          this.reloadShapes()
          this.select([id])
        }
        break
      }
    }
    this.scheduleRender()
  }

  private afterCreate (id: string): void {
    this.reloadShapes()
    this.setTool('select')
    this.select([id])
  }

  private onWheel (e: WheelEvent): void {
    e.preventDefault()
    if (e.ctrlKey || e.metaKey) {
      this.setCamera(zoomAt(this.cam, this.screenPoint(e), this.cam.zoom * Math.exp(-e.deltaY / 300)))
    } else {
      this.setCamera({ ...this.cam, x: this.cam.x + e.deltaX / this.cam.zoom, y: this.cam.y + e.deltaY / this.cam.zoom })
    }
  }

  /** Tab, the arrows and Enter while the canvas itself has focus: true when the key was used. */
  private onCanvasKey (e: KeyboardEvent): boolean {
    if (e.ctrlKey || e.metaKey || e.altKey) return false
    const order = focusOrder(this.shapes)
    const move = (step: 1 | -1, wrap: boolean): boolean => {
      const next = stepFocus(order, this.focusedShape, step, wrap)
      if (next === null) { this.focusedShape = null; this.scheduleRender(); return false }
      this.focusedShape = next
      this.revealFocused()
      this.scheduleRender()
      return true
    }
    switch (e.key) {
      case 'Tab': return move(e.shiftKey ? -1 : 1, false)
      case 'ArrowRight': case 'ArrowDown': return move(1, true)
      case 'ArrowLeft': case 'ArrowUp': return move(-1, true)
      case 'Enter': {
        const id = this.focusedShape
        if (id === null || !this.byId.has(id)) return false
        if (this.selection.length === 1 && this.selection[0] === id && !e.shiftKey) return false // edits it (below)
        if (this.byId.get(id)?.locked === true) {
          this.d.toast('A fairy is still drawing that shape: it can be edited once it is done.')
          return true
        }
        if (e.shiftKey) this.select(this.selection.includes(id) ? this.selection.filter(i => i !== id) : [...this.selection, id])
        else this.select([id])
        this.focusedShape = id
        return true
      }
      default: return false
    }
  }

  /** Pans so that the focused shape is in view (when it is not). */
  private revealFocused (): void {
    const s = this.focusedShape !== null ? this.byId.get(this.focusedShape) : undefined
    if (s === undefined) return
    const view = this.viewportBox()
    const b = shapeBounds(s)
    if (b.x >= view.x && b.y >= view.y && b.x + b.w <= view.x + view.w && b.y + b.h <= view.y + view.h) return
    this.setCamera({ ...this.cam, x: b.x + b.w / 2 - view.w / 2, y: b.y + b.h / 2 - view.h / 2 })
  }

  private onKeyDown (e: KeyboardEvent): void {
    if (isTypingTarget(e.target)) return
    if (e.target === this.d.svg && this.onCanvasKey(e)) { e.preventDefault(); return }
    // Enter and Space on a button or a list row are that control's.
    if ((e.key === 'Enter' || e.key === ' ') && isControlTarget(e.target)) return
    const mod = e.ctrlKey || e.metaKey
    if (e.code === 'Space') { this.spaceHeld = true; return }
    if (mod && e.key.toLowerCase() === 'z') { e.preventDefault(); if (e.shiftKey) this.redoOwn(); else this.undoOwn(); return }
    if (mod && e.key.toLowerCase() === 'y') { e.preventDefault(); this.redoOwn(); return }
    if (mod && (e.key === '=' || e.key === '+')) { e.preventDefault(); this.zoomBy(1.25); return }
    if (mod && e.key === '-') { e.preventDefault(); this.zoomBy(0.8); return }
    if (mod) return
    if (e.key === 'Delete' || e.key === 'Backspace') { e.preventDefault(); this.deleteSelection(); return }
    if (e.key === 'Escape') { this.gesture = null; this.select([]); this.selectGhost(null); this.setTool('select'); return }
    if (e.key === ']') { this.reorderSelection('front'); return }
    if (e.key === '[') { this.reorderSelection('back'); return }
    if (e.key === 'Enter' && this.selection.length === 1) {
      const s = this.byId.get(this.selection[0] ?? '')
      if (s !== undefined) { e.preventDefault(); this.openTextEditor(s.id, { x: s.x, y: s.y }) }
      return
    }
    const tool = toolForKey(e.key)
    if (tool !== null) this.setTool(tool)
  }

  // ---- text editing -------------------------------------------------------------------------

  /** Opens the text box over shape `id` (or, for `null`, where a new text shape will go). */
  openTextEditor (id: string | null, at: Point): void {
    const s = id !== null ? this.byId.get(id) : undefined
    if (s !== undefined && (s.locked || s.kind === 'draw')) return
    const ed = this.d.textEditor
    const screen = { x: (at.x - this.cam.x) * this.cam.zoom, y: (at.y - this.cam.y) * this.cam.zoom }
    this.editing = { id, at, type: id === null ? 'text' : 'edit' }
    ed.value = s !== undefined && 'text' in s ? s.text : ''
    ed.style.left = `${Math.round(screen.x)}px`
    ed.style.top = `${Math.round(screen.y)}px`
    ed.hidden = false
    ed.dataset.editing = id ?? 'new'
    setTimeout(() => ed.focus(), 0)
  }

  private closeTextEditor (): void {
    this.editing = null
    this.d.textEditor.hidden = true
    delete this.d.textEditor.dataset.editing
  }

  /** Commits the open text box: a new text shape, or the edited shape's `text` (one transaction). */
  commitTextEditor (): void {
    const ed = this.editing
    if (ed === null) return
    const value = this.d.textEditor.value
    this.closeTextEditor()
    if (ed.id === null) {
      if (value.trim() === '') return
      const id = ops.createShape(this.d.doc, this.origin, this.d.user.id, 'text', {
        x: ed.at.x, y: ed.at.y, text: value, fontSize: 24, textAlign: 'start', color: this.style.color
      })
      this.afterCreate(id)
    } else {
      ops.setText(this.d.doc, this.origin, ed.id, value)
    }
  }

  // ---- drawing ------------------------------------------------------------------------------

  scheduleRender (): void {
    if (this.renderQueued) return
    this.renderQueued = true
    requestAnimationFrame(() => { this.renderQueued = false; this.render() })
  }

  /** The sprites of this frame, each a glide step closer to its fairy's awareness position. */
  private sprites (): { sprites: FairySprite[], moving: boolean, look: FairyLook } {
    const now = performance.now()
    const dt = this.spriteAt === 0 ? 16 : Math.min(100, now - this.spriteAt)
    this.spriteAt = now
    const look = this.d.fairyLook()
    const { fairies } = readPeers(this.d.awareness.getStates() as Map<number, unknown>, this.d.awareness.clientID)
    const seen = new Map<string, Point>()
    let moving = false
    const sprites = fairies.map(fy => {
      const target = { x: fy.x, y: fy.y }
      const prev = this.spritePos.get(fy.id)
      const at = prev === undefined ? target : glide(prev, target, dt)
      if (at.x !== target.x || at.y !== target.y) moving = true
      seen.set(fy.id, at)
      return {
        id: fy.id, name: fy.name, x: at.x, y: at.y, mode: fy.mode, pose: fy.pose, flip: fy.flip,
        hat: look.hats.get(fy.id) ?? '', color: look.colors.get(fy.id) ?? null, selected: look.selected.has(fy.id),
        thinking: fy.thinking, lastMessage: fy.lastMessage
      }
    })
    this.spritePos = seen
    return { sprites, moving, look }
  }

  /** Keeps redrawing the sprites (only) while one is still gliding. */
  private queueGlide (moving: boolean): void {
    if (!moving) { this.spriteAt = 0; return }
    if (this.glideQueued) return
    this.glideQueued = true
    requestAnimationFrame(() => {
      this.glideQueued = false
      const { sprites, moving: still } = this.sprites()
      drawFairies(this.layers, sprites, this.visibleViewBox())
      this.queueGlide(still)
    })
  }

  /** The ghosts of the pending suggestions, over the shapes as they are now. */
  private ghosts (): ReturnType<typeof ghosts> {
    const { shapes } = ops.roots(this.d.doc)
    return ghosts(this.suggestions, id => shapeKeys(shapes.get(id)))
  }

  /** The keyboard focus ring (only while the canvas has focus) and the canvas's accessible name. */
  private drawFocus (): void {
    const svg = this.d.svg
    const id = this.focusedShape !== null && this.byId.has(this.focusedShape) ? this.focusedShape : null
    const focused = typeof document !== 'undefined' && document.activeElement === svg
    if (id !== null) svg.dataset.focusedShape = id
    else delete svg.dataset.focusedShape
    svg.setAttribute('aria-label', focused ? focusDescription(this.shapes, focusOrder(this.shapes), id, this.selection) : 'canvas')
    const s = id !== null ? this.byId.get(id) : undefined
    // The ring is for the keyboard: a click that focuses the canvas shows the selection only.
    if (!focused || s === undefined || !svg.matches(':focus-visible')) return
    const b = shapeBounds(s)
    const pad = 6 / this.cam.zoom
    const ring = document.createElementNS('http://www.w3.org/2000/svg', 'rect')
    ring.setAttribute('class', 'focus-ring')
    ring.setAttribute('data-focus-ring', s.id)
    ring.setAttribute('x', String(b.x - pad))
    ring.setAttribute('y', String(b.y - pad))
    ring.setAttribute('width', String(b.w + 2 * pad))
    ring.setAttribute('height', String(b.h + 2 * pad))
    ring.setAttribute('rx', String(4 / this.cam.zoom))
    ring.setAttribute('stroke-width', String(2 / this.cam.zoom))
    this.layers.overlay.appendChild(ring)
  }

  private render (): void {
    const { sprites, moving, look } = this.sprites()
    this.queueGlide(moving)
    drawScene(this.layers, {
      sprites,
      names: look.names,
      cam: this.cam,
      shapes: this.shapes,
      gesture: this.gesture,
      selection: this.selection,
      style: this.style,
      awareness: this.d.awareness,
      tasks: ops.roots(this.d.doc).tasks,
      projects: this.d.doc.getMap('projects'),
      ghosts: this.ghosts(),
      ghostLook: {
        zoom: this.cam.zoom,
        colors: look.colors,
        names: look.names,
        selected: this.ghostSelected,
        hovered: this.ghostHovered,
        busy: this.deciding,
        view: this.visibleViewBox()
      }
    })
    this.drawFocus()
    this.d.onRender?.()
  }
}
