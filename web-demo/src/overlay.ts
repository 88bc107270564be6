// Everything drawn over the shapes, as pure virtual nodes: selections (ours and other people's),
// the resize handle, remote cursors (`data-peer="CLIENT_ID"`), fairy sprites (each in its colour,
// `data-color`, with its name label and bubble placed so that none overlaps another) and task
// frames.
import { pageToScreen, shapeBounds, type Box, type Camera, type Point } from './geometry.js'
import type { PeerFairy, PeerUser } from '@fairyring/client'
import type { Shape, LinkShape, DrawShape } from '@fairyring/client'
import { h, type VNode } from './vnode.js'

/** Own-selection colour (tldraw's selection blue). */
export const SELECTION_COLOR = '#2f80ed'

const f = (n: number): string => String(Math.round(n * 100) / 100)

/** A shape shifted by `(dx, dy)` (the live preview of a move before it is committed). */
export function translateShape<S extends Shape> (s: S, dx: number, dy: number): S {
  if (s.kind === 'link') {
    const l = s as LinkShape
    return { ...l, x: l.x + dx, y: l.y + dy, x1: l.x1 + dx, y1: l.y1 + dy, x2: l.x2 + dx, y2: l.y2 + dy } as S
  }
  return { ...s, x: s.x + dx, y: s.y + dy }
}

/** A geo shape with a new box (the live preview of a resize). Other kinds are returned as they are. */
export function withBox<S extends Shape> (s: S, box: Box): S {
  return s.kind === 'geo' ? { ...s, x: box.x, y: box.y, w: box.w, h: box.h } : s
}

/** A pen stroke's points made relative to their first point, with that point as the shape origin. */
export function strokeFromPage (points: Point[]): { x: number, y: number, points: number[] } | null {
  const first = points[0]
  if (first === undefined) return null
  const flat: number[] = []
  for (const p of points) flat.push(Math.round((p.x - first.x) * 100) / 100, Math.round((p.y - first.y) * 100) / 100)
  return { x: first.x, y: first.y, points: flat }
}

/** A draw shape for the preview of a stroke still being drawn. */
export function previewStroke (points: Point[], color: string): DrawShape | null {
  const s = strokeFromPage(points)
  if (s === null) return null
  return {
    id: '__preview', kind: 'draw', type: 'draw', pageId: '', x: s.x, y: s.y, rotation: 0, index: '',
    color, fill: 'none', note: '', locked: false, createdBy: '', points: s.points
  }
}

function outline (b: Box, zoom: number, color: string, dashed: boolean, attrs: Record<string, string> = {}): VNode {
  const pad = 4 / zoom
  return h('rect', {
    x: f(b.x - pad), y: f(b.y - pad), width: f(b.w + 2 * pad), height: f(b.h + 2 * pad),
    fill: 'none', stroke: color, 'stroke-width': f(1.5 / zoom), 'stroke-dasharray': dashed ? `${f(6 / zoom)} ${f(4 / zoom)}` : undefined,
    'pointer-events': 'none', ...attrs
  })
}

/** Our selection: an outline per shape, and a resize handle when exactly one geo shape is selected. */
export function renderOwnSelection (selected: Shape[], zoom: number): VNode {
  const children: VNode[] = selected.map(s => outline(shapeBounds(s), zoom, SELECTION_COLOR, false, { 'data-selected': s.id }))
  const only = selected[0]
  if (selected.length === 1 && only !== undefined && only.kind === 'geo' && !only.locked) {
    const b = shapeBounds(only)
    const size = 10 / zoom
    children.push(h('rect', {
      'data-handle': 'resize', x: f(b.x + b.w - size / 2), y: f(b.y + b.h - size / 2), width: f(size), height: f(size),
      fill: '#fff', stroke: SELECTION_COLOR, 'stroke-width': f(1.5 / zoom), class: 'handle'
    }))
  }
  return h('g', { class: 'own-selection' }, children)
}

/** Other people's selections: a dashed outline in their colour, labelled with their name. */
export function renderPeerSelections (peers: PeerUser[], shapes: Map<string, Shape>, zoom: number): VNode {
  const children: VNode[] = []
  for (const p of peers) {
    for (const id of p.selection) {
      const s = shapes.get(id)
      if (s === undefined) continue
      const b = shapeBounds(s)
      children.push(h('g', { 'data-peer-selection': String(p.clientId), 'data-shape': id }, [
        outline(b, zoom, p.color, true),
        h('text', { x: f(b.x), y: f(b.y - 8 / zoom), 'font-size': f(11 / zoom), fill: p.color, 'pointer-events': 'none' }, [p.name])
      ]))
    }
  }
  return h('g', { class: 'peer-selections' }, children)
}

/** Remote cursors in screen space (constant size at any zoom), one `data-peer` group each. */
export function renderCursors (peers: PeerUser[], cam: Camera): VNode {
  const children: VNode[] = []
  for (const p of peers) {
    if (p.cursor === null) continue
    const s = pageToScreen(cam, p.cursor)
    children.push(h('g', { 'data-peer': String(p.clientId), class: 'cursor', transform: `translate(${f(s.x)},${f(s.y)})` }, [
      h('path', { d: 'M0,0 L0,17 L4.5,12.5 L8,20 L11,18.6 L7.6,11.4 L13.5,11.4 Z', fill: p.color, stroke: '#fff', 'stroke-width': 1.5 }),
      h('rect', { x: 12, y: 18, rx: 4, width: Math.max(24, p.name.length * 7 + 10), height: 18, fill: p.color }),
      h('text', { x: 17, y: 31, 'font-size': 12, fill: '#fff', 'font-family': 'system-ui, sans-serif' }, [p.name])
    ]))
  }
  return h('g', { class: 'cursors' }, children)
}

/** What a sprite shows: the fairy's presence, where it is drawn now, and the page's view of it. */
export interface FairySprite {
  id: string
  name: string
  /** Where the sprite is drawn this frame (gliding towards the awareness position). */
  x: number
  y: number
  mode: string
  pose: PeerFairy['pose']
  flip: boolean
  hat: string
  /** Its project's colour, else its own (`null`: the fairy pink). */
  color: string | null
  selected: boolean
  thinking: string
  lastMessage: string
}

const FAIRY_PINK = '#f9a8d4'
/** How much bigger than its drawing (a head of radius 7) a sprite is shown. */
const SPRITE_SCALE = 1.5
const HAT_COLORS: Record<string, string> = {
  pointy: '#7c3aed', wizard: '#4338ca', top: '#1f2937', bow: '#e11d48', crown: '#f59e0b',
  beret: '#dc2626', flower: '#ec4899', cap: '#2563eb'
}

/** The hat on a head of radius 7 centred at the origin (unknown hats are pointy). */
export function renderHat (hat: string): VNode {
  const fill = HAT_COLORS[hat] ?? HAT_COLORS.pointy ?? '#7c3aed'
  const attrs = { fill, stroke: '#111827', 'stroke-width': 0.8 }
  let parts: VNode[]
  switch (hat) {
    case 'top': parts = [h('rect', { x: -5, y: -19, width: 10, height: 13, ...attrs }), h('rect', { x: -9, y: -7, width: 18, height: 2.5, ...attrs })]; break
    case 'crown': parts = [h('path', { d: 'M-7,-5 L-7,-14 L-3.5,-9 L0,-16 L3.5,-9 L7,-14 L7,-5 Z', ...attrs })]; break
    case 'bow': parts = [h('path', { d: 'M0,-8 L-8,-13 L-8,-3 Z M0,-8 L8,-13 L8,-3 Z', ...attrs }), h('circle', { cx: 0, cy: -8, r: 2, ...attrs })]; break
    case 'beret': parts = [h('ellipse', { cx: 1, cy: -7, rx: 9, ry: 3.5, ...attrs }), h('circle', { cx: 1, cy: -11, r: 1.2, fill })]; break
    case 'flower': parts = [h('circle', { cx: 4, cy: -8, r: 4, ...attrs }), h('circle', { cx: 4, cy: -8, r: 1.5, fill: '#fde047' })]; break
    case 'cap': parts = [h('path', { d: 'M-7,-4 A7,7 0 0 1 7,-4 Z', ...attrs }), h('rect', { x: 4, y: -5, width: 7, height: 2, ...attrs })]; break
    case 'wizard': parts = [h('path', { d: 'M-8,-5 L0,-26 L8,-5 Z', ...attrs }), h('text', { x: -2, y: -10, 'font-size': 6, fill: '#fde047' }, ['✦'])]; break
    default: parts = [h('path', { d: 'M-7,-5 L0,-24 L7,-5 Z', ...attrs })]
  }
  return h('g', { class: 'hat', 'data-hat': hat !== '' ? hat : 'pointy' }, parts)
}

/** Cuts `text` to `max` characters with an ellipsis. */
export function ellipsize (text: string, max: number): string {
  const t = text.replace(/\s+/g, ' ').trim()
  return t.length <= max ? t : `${t.slice(0, Math.max(1, max - 1))}…`
}

/** What a sprite's bubble says (the thought while thinking, else the last message), and whether it is a thought. */
function bubbleText (fy: FairySprite): { raw: string, text: string, thinking: boolean, w: number } | null {
  const thinking = fy.pose === 'thinking' && fy.thinking !== ''
  const raw = thinking ? fy.thinking : fy.lastMessage
  if (raw === '') return null
  const text = ellipsize(raw, 48)
  return { raw, text, thinking, w: Math.min(320, text.length * 6.4 + 16) }
}

/** Where a sprite's name label and bubble go, as offsets from their usual places (page px, down is +). */
export interface LabelPlace { label: number, bubble: number }

/** Space (page px at zoom 1) kept between a bubble and the visible canvas's edge. */
const BUBBLE_MARGIN = 4

/**
 * The left edge (page px) of a sprite's bubble `w` wide, and its side: right of the sprite as
 * usual; left of it when the right side would leave `view` (the canvas's visible page area:
 * past the canvas's edge, or under the sidebar lying over it); pushed inside `view` when
 * neither side fits.
 */
export function bubbleX (fy: Pick<FairySprite, 'x'>, w: number, view?: Box): { x: number, side: 'right' | 'left' } {
  const right = fy.x + 20
  if (view === undefined || right + w <= view.x + view.w - BUBBLE_MARGIN) return { x: right, side: 'right' }
  const left = fy.x - 20 - w
  if (left >= view.x + BUBBLE_MARGIN) return { x: left, side: 'left' }
  return { x: Math.max(view.x + BUBBLE_MARGIN, view.x + view.w - BUBBLE_MARGIN - w), side: 'left' }
}

/** Boxes (page px) of a sprite's name label and bubble at offsets `place`, the bubble kept inside `view`. */
export function labelBoxes (fy: FairySprite, place: LabelPlace = { label: 0, bubble: 0 }, view?: Box): { label: Box, bubble: Box | null } {
  const w = fy.name.length * 7 + 8
  const b = bubbleText(fy)
  return {
    label: { x: fy.x - w / 2, y: fy.y + 28 + place.label, w, h: 16 },
    bubble: b === null ? null : { x: bubbleX(fy, b.w, view).x, y: fy.y - 62 + place.bubble, w: b.w, h: 30 }
  }
}

function overlaps (a: Box, b: Box): boolean {
  return a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h
}

/**
 * Places every sprite's name label and bubble so that none overlaps another (labels, then
 * bubbles, top to bottom): a label that would cover one placed before moves down a line, a
 * bubble up a bubble's height, until it is clear. Sprites far apart keep the usual places.
 */
export function placeLabels (fairies: readonly FairySprite[], view?: Box): Map<string, LabelPlace> {
  const order = [...fairies].sort((a, b) => a.y - b.y || a.x - b.x || (a.id < b.id ? -1 : 1))
  const placed: Box[] = []
  const out = new Map<string, LabelPlace>()
  const settle = (box: (dy: number) => Box, step: number): number => {
    let dy = 0
    // Bounded: at most one step per box placed before clears it.
    for (let i = 0; i <= placed.length * 3 && placed.some(p => overlaps(p, box(dy))); i++) dy += step
    placed.push(box(dy))
    return dy
  }
  for (const fy of order) {
    out.set(fy.id, { label: settle(dy => labelBoxes(fy, { label: dy, bubble: 0 }).label, 16), bubble: 0 })
  }
  for (const fy of order) {
    const place = out.get(fy.id) ?? { label: 0, bubble: 0 }
    if (labelBoxes(fy).bubble === null) continue
    place.bubble = settle(dy => labelBoxes(fy, { label: place.label, bubble: dy }, view).bubble ?? { x: 0, y: 0, w: 0, h: 0 }, -32)
  }
  return out
}

/**
 * The speech bubble: the thought while thinking, else the last message (nothing when empty), `dy`
 * above its usual place, on the side of the sprite that keeps it inside `view` (`data-bubble-side`).
 */
function bubble (fy: FairySprite, dy = 0, view?: Box): VNode[] {
  const b = bubbleText(fy)
  if (b === null) return []
  const { raw, text, thinking, w } = b
  const { x, side } = bubbleX(fy, w, view)
  const dx = x - fy.x
  // The tail points down at the sprite from the bubble's corner nearest it (only next to it).
  const tail = side === 'right' ? 'M6,22 L2,30 L14,22' : `M${f(w - 6)},22 L${f(w - 2)},30 L${f(w - 14)},22`
  const beside = side === 'right' ? dx === 20 : dx === -20 - w
  return [h('g', { class: thinking ? 'bubble thinking' : 'bubble', 'data-bubble': thinking ? 'thinking' : 'message', 'data-bubble-side': side, transform: `translate(${f(dx)},${f(-62 + dy)})` }, [
    h('rect', { width: f(w), height: 22, rx: 8, fill: '#fff', stroke: thinking ? '#9ca3af' : (fy.color ?? '#db2777'), 'stroke-dasharray': thinking ? '3 2' : undefined }),
    ...(dy === 0 && beside ? [h('path', { d: tail, fill: '#fff', stroke: thinking ? '#9ca3af' : (fy.color ?? '#db2777') })] : []),
    h('text', { x: 8, y: 15, 'font-size': 11, fill: thinking ? '#6b7280' : '#1f2937', 'font-style': thinking ? 'italic' : undefined, 'font-family': 'system-ui, sans-serif' }, [text]),
    h('title', {}, [raw])
  ])]
}

/** What the pose adds: dots while thinking, a wand while working, sparkles when celebrating. */
function poseProps (pose: FairySprite['pose']): VNode[] {
  switch (pose) {
    case 'thinking': return [h('text', { class: 'dots', x: -7, y: -26, 'font-size': 12, fill: '#6b7280' }, ['• • •'])]
    case 'working': return [h('g', { class: 'wand' }, [
      h('line', { x1: 7, y1: 3, x2: 17, y2: -7, stroke: '#92400e', 'stroke-width': 2, 'stroke-linecap': 'round' }),
      h('path', { d: 'M17,-12 L18.5,-8.5 L22,-7 L18.5,-5.5 L17,-2 L15.5,-5.5 L12,-7 L15.5,-8.5 Z', fill: '#fde047', stroke: '#f59e0b', 'stroke-width': 0.6 })
    ])]
    case 'celebrating': return [h('g', { class: 'sparkles', fill: '#fde047', stroke: '#f59e0b', 'stroke-width': 0.6 }, [
      h('path', { d: 'M-16,-16 l1.5,3.5 l3.5,1.5 l-3.5,1.5 l-1.5,3.5 l-1.5,-3.5 l-3.5,-1.5 l3.5,-1.5 Z' }),
      h('path', { d: 'M16,-20 l1.5,3.5 l3.5,1.5 l-3.5,1.5 l-1.5,3.5 l-1.5,-3.5 l-3.5,-1.5 l3.5,-1.5 Z' }),
      h('path', { d: 'M0,-30 l1,2.5 l2.5,1 l-2.5,1 l-1,2.5 l-1,-2.5 l-2.5,-1 l2.5,-1 Z' })
    ])]
    default: return []
  }
}

/**
 * Fairy sprites in page space, one `data-fairy="ID"` group each with `data-pose` and
 * `data-mode`: wings, a body in its project's colour, its hat, what its pose adds (facing left
 * when `flip`), its name, a ring when selected, and a bubble with its thought or last message
 * (inside `view`, the canvas's visible page area, when given).
 */
export function renderFairies (fairies: FairySprite[], view?: Box): VNode {
  const places = placeLabels(fairies, view)
  return h('g', { class: 'fairies' }, fairies.map(fy => {
    const body = fy.color ?? FAIRY_PINK
    const place = places.get(fy.id) ?? { label: 0, bubble: 0 }
    return h('g', {
      'data-fairy': fy.id, 'data-pose': fy.pose, 'data-mode': fy.mode, 'data-flip': String(fy.flip), 'data-color': body,
      'data-selected': fy.selected ? 'true' : undefined,
      class: `fairy pose-${fy.pose}${fy.selected ? ' selected' : ''}`, transform: `translate(${f(fy.x)},${f(fy.y)})`
    }, [
      ...(fy.selected ? [h('circle', { class: 'ring', r: 27, fill: 'none', stroke: SELECTION_COLOR, 'stroke-width': 1.5, 'stroke-dasharray': '4 3' })] : []),
      h('g', { class: 'sprite' }, [
        h('g', { class: 'figure', transform: fy.flip ? `scale(${-SPRITE_SCALE},${SPRITE_SCALE})` : `scale(${SPRITE_SCALE})` }, [
          h('ellipse', { cx: -9, cy: -4, rx: 9, ry: 5, fill: '#dbeafe', stroke: '#93c5fd', transform: 'rotate(-25)', class: 'wing' }),
          h('ellipse', { cx: 9, cy: -4, rx: 9, ry: 5, fill: '#dbeafe', stroke: '#93c5fd', transform: 'rotate(25)', class: 'wing' }),
          h('path', { d: 'M-5,5 L0,16 L5,5 Z', fill: body, stroke: '#831843', 'stroke-width': 0.8 }),
          h('circle', { r: 7, fill: body, stroke: fy.color ?? '#db2777', 'stroke-width': 1.5, class: 'body' }),
          h('circle', { cx: 2.5, cy: -1, r: 1, fill: '#1f2937' }),
          renderHat(fy.hat),
          ...poseProps(fy.pose)
        ])
      ]),
      h('text', { y: f(40 + place.label), 'text-anchor': 'middle', 'font-size': 12, fill: fy.color ?? '#831843', 'font-weight': 600, stroke: '#fff', 'stroke-width': 3, 'paint-order': 'stroke', 'font-family': 'system-ui, sans-serif', class: 'label' }, [fy.name]),
      ...bubble(fy, place.bubble, view)
    ])
  }))
}

/** A fairy task's spatial bounds: a dashed frame labelled inside (title, assignee, status). */
export interface TaskFrame { id: string, title: string, status: string, assignee: string, box: Box }

/** The label of a task frame: `title · assignee · status` (the assignee when there is one). */
export function taskLabel (t: TaskFrame, names: ReadonlyMap<string, string> = new Map()): string {
  const who = t.assignee !== '' ? (names.get(t.assignee) ?? t.assignee) : ''
  return [t.title, who, t.status].filter(x => x !== '').join(' · ')
}

export function renderTaskFrames (tasks: TaskFrame[], zoom: number, names: ReadonlyMap<string, string> = new Map()): VNode {
  return h('g', { class: 'task-frames' }, tasks.map(t => {
    const color = t.status === 'done' ? '#4cb05e' : '#ae3ec9'
    return h('g', { 'data-task': t.id, 'data-status': t.status, 'data-assignee': t.assignee !== '' ? t.assignee : undefined }, [
      outline(t.box, zoom, color, true),
      // Inside the frame's top-left corner: a frame at the viewport's edge (a project split from
      // the page's viewport) keeps its label on screen.
      h('text', { x: f(t.box.x + 6 / zoom), y: f(t.box.y + 16 / zoom), 'font-size': f(12 / zoom), fill: color, 'pointer-events': 'none' }, [taskLabel(t, names)])
    ])
  }))
}

/** The marquee (brush) rectangle while selecting by dragging on empty canvas. */
export function renderBrush (b: Box, zoom: number): VNode {
  return h('rect', {
    class: 'brush', x: f(b.x), y: f(b.y), width: f(b.w), height: f(b.h),
    fill: 'rgba(47,128,237,0.08)', stroke: SELECTION_COLOR, 'stroke-width': f(1 / zoom), 'pointer-events': 'none'
  })
}
