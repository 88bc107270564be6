// Everything drawn over the shapes, as pure virtual nodes: selections (ours and other people's),
// the resize handle, remote cursors (`data-peer="CLIENT_ID"`), fairy sprites and task frames.
import { pageToScreen, shapeBounds, type Box, type Camera, type Point } from './geometry.js'
import type { PeerFairy, PeerUser } from './presence.js'
import type { Shape, LinkShape, DrawShape } from './schema.js'
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

/** Fairies as simple sprites in page space: a glowing body, wings and the fairy's name. */
export function renderFairies (fairies: PeerFairy[]): VNode {
  return h('g', { class: 'fairies' }, fairies.map(fy => h('g', {
    'data-fairy': fy.id, class: fy.thinking ? 'fairy thinking' : 'fairy', transform: `translate(${f(fy.x)},${f(fy.y)})`
  }, [
    h('ellipse', { cx: -9, cy: -4, rx: 9, ry: 5, fill: '#dbeafe', stroke: '#93c5fd', transform: 'rotate(-25)' }),
    h('ellipse', { cx: 9, cy: -4, rx: 9, ry: 5, fill: '#dbeafe', stroke: '#93c5fd', transform: 'rotate(25)' }),
    h('circle', { r: 7, fill: '#f9a8d4', stroke: '#db2777', 'stroke-width': 1.5 }),
    h('text', { y: 24, 'text-anchor': 'middle', 'font-size': 12, fill: '#831843', 'font-family': 'system-ui, sans-serif' }, [fy.name]),
    ...(fy.lastMessage !== '' ? [h('title', {}, [fy.lastMessage])] : [])
  ])))
}

/** A fairy task's spatial bounds (SPEC §2 `tasks`): a labelled dashed frame. */
export interface TaskFrame { id: string, title: string, status: string, box: Box }

export function renderTaskFrames (tasks: TaskFrame[], zoom: number): VNode {
  return h('g', { class: 'task-frames' }, tasks.map(t => h('g', { 'data-task-id': t.id, 'data-status': t.status }, [
    outline(t.box, zoom, t.status === 'done' ? '#4cb05e' : '#ae3ec9', true),
    h('text', { x: f(t.box.x), y: f(t.box.y - 8 / zoom), 'font-size': f(12 / zoom), fill: '#ae3ec9', 'pointer-events': 'none' }, [`${t.title} · ${t.status}`])
  ])))
}

/** The marquee (brush) rectangle while selecting by dragging on empty canvas. */
export function renderBrush (b: Box, zoom: number): VNode {
  return h('rect', {
    class: 'brush', x: f(b.x), y: f(b.y), width: f(b.w), height: f(b.h),
    fill: 'rgba(47,128,237,0.08)', stroke: SELECTION_COLOR, 'stroke-width': f(1 / zoom), 'pointer-events': 'none'
  })
}
