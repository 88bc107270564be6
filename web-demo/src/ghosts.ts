// Pending suggestions drawn over the canvas, as pure virtual nodes: one `data-suggestion="ID"`
// group per record (`data-op`, `data-suggestion-fairy`, `data-request`), in the suggesting
// fairy's colour (its sprite's: the project colour, else its own) with a dashed frame and
// a translucent fill. A create shows the proposed shape ghosted; an update the proposed look
// ghosted over or beside the current shape (which the shapes layer still draws as it is), linked
// to it when it moves (over it, on a veil, when it changes in place); a delete the current shape
// crossed out. The ghost under the pointer and the selected one get ✓ and ✗ buttons
// (`data-suggestion-action="accept" | "reject"`), drawn above every ghost so that none covers
// them, and kept inside the canvas's visible area (never under the toolbar). Ghosts are not shapes: their drawings carry `data-ghost-shape-id`, never `data-shape-id`.
import { renderShape } from './render.js'
import { shapeBounds, type Box } from './geometry.js'
import type { Ghost, SuggestionOp } from '@fairyring/client'
import { h, type VNode } from './vnode.js'

/** The fairy pink and its darker outline (a sprite's body and edge when it works alone). */
export const FAIRY_FILL = '#f9a8d4'
export const FAIRY_EDGE = '#db2777'
export const ACCEPT_COLOR = '#2b8a3e'
export const REJECT_COLOR = '#c92a2a'

const f = (n: number): string => String(Math.round(n * 100) / 100)

/** A fairy's ghost colours, as its sprite wears them: its project colour, else pink with a darker edge. */
export function ghostInk (color: string | null): { stroke: string, fill: string } {
  return color !== null ? { stroke: color, fill: color } : { stroke: FAIRY_EDGE, fill: FAIRY_FILL }
}

/** What a ghost's label says the fairy suggests. */
export function opWord (op: SuggestionOp): string {
  return op === 'create' ? 'new' : op === 'update' ? 'change' : 'delete'
}

/** The box a ghost's frame surrounds: the proposed shape's, or for a delete the current one's. */
export function ghostBox (g: Ghost): Box | null {
  const s = g.proposed ?? g.current
  return s !== null ? shapeBounds(s) : null
}

/** How the page wants the ghosts drawn this frame. */
export interface GhostLook {
  zoom: number
  /** Each fairy's project colour (`null` or missing: the fairy pink). */
  colors: ReadonlyMap<string, string | null>
  names: ReadonlyMap<string, string>
  /** The ghost this browser selected and the one under the pointer (their buttons are shown). */
  selected: string | null
  hovered: string | null
  /** Records whose decision is on its way to the server (their buttons are hidden). */
  busy: ReadonlySet<string>
  /** The page area the canvas shows (its ✓ and ✗ are kept inside it); none: not clamped. */
  view?: Box
}

/** Radius of a ✓ / ✗ button and the gap kept between it and the canvas's edge, in screen px. */
const BUTTON_R = 11
const EDGE_GAP = 4

/**
 * Where a ghost's ✓ and ✗ go: astride its frame's right edge, one above the other, moved inside
 * `view` (the canvas's visible page area) with a small gap when they would fall outside it —
 * under the toolbar or past the sidebar — as long as the frame itself is in view.
 */
export function actionPoints (frame: Box, zoom: number, view?: Box): { accept: { x: number, y: number }, reject: { x: number, y: number } } {
  let x = frame.x + frame.w
  let y = frame.y + 14 / zoom
  const gap = 26 / zoom
  if (view !== undefined && frame.x < view.x + view.w && view.x < frame.x + frame.w && frame.y < view.y + view.h && view.y < frame.y + frame.h) {
    const m = (BUTTON_R + EDGE_GAP) / zoom
    const clamp = (v: number, lo: number, hi: number): number => lo > hi ? (lo + hi) / 2 : Math.min(hi, Math.max(lo, v))
    x = clamp(x, view.x + m, view.x + view.w - m)
    y = clamp(y, view.y + m, view.y + view.h - m - gap)
  }
  return { accept: { x, y }, reject: { x, y: y + gap } }
}

/** A drawn shape's root renamed so that nothing takes it for a live shape. */
function ghostIds (v: VNode): VNode {
  const { 'data-shape-id': id, class: _cls, ...rest } = v.attrs
  return id === undefined ? v : h(v.tag, { ...rest, 'data-ghost-shape-id': id, class: 'ghost-shape' }, v.children)
}

function button (action: 'accept' | 'reject', cx: number, cy: number, zoom: number): VNode {
  const r = BUTTON_R / zoom
  const color = action === 'accept' ? ACCEPT_COLOR : REJECT_COLOR
  return h('g', {
    'data-suggestion-action': action, class: `ghost-button ${action}`, role: 'button',
    'aria-label': action === 'accept' ? 'Accept this suggestion' : 'Reject this suggestion'
  }, [
    h('title', {}, [action === 'accept' ? 'Accept: make this change' : 'Reject: leave the canvas as it is']),
    h('circle', { cx: f(cx), cy: f(cy), r: f(r), fill: '#fff', stroke: color, 'stroke-width': f(2 / zoom) }),
    h('text', {
      x: f(cx), y: f(cy), 'font-size': f(14 / zoom), 'font-weight': 700, fill: color, 'text-anchor': 'middle',
      'dominant-baseline': 'central', 'font-family': 'system-ui, sans-serif', 'pointer-events': 'none'
    }, [action === 'accept' ? '✓' : '✗'])
  ])
}

/** The frame around a ghost's box (a little outside it, the same on screen at any zoom). */
function frameOf (box: Box, zoom: number): Box {
  const pad = 6 / zoom
  return { x: box.x - pad, y: box.y - pad, w: box.w + 2 * pad, h: box.h + 2 * pad }
}

/**
 * A ghost's ✓ and ✗, one above the other astride its frame's right edge (clear of its label;
 * `null` when it has no box). The group carries the ghost's `data-suggestion` too: the pointer
 * on them is still on it.
 */
export function renderGhostActions (g: Ghost, zoom: number, view?: Box): VNode | null {
  const box = ghostBox(g)
  if (box === null) return null
  const { accept, reject } = actionPoints(frameOf(box, zoom), zoom, view)
  return h('g', { class: 'ghost-actions', 'data-suggestion': g.id, 'data-actions-for': g.id }, [
    button('accept', accept.x, accept.y, zoom),
    button('reject', reject.x, reject.y, zoom)
  ])
}

/** One ghost, without its buttons (`null` when it has nothing to draw). */
export function renderGhost (g: Ghost, look: GhostLook): VNode | null {
  const box = ghostBox(g)
  if (box === null) return null
  const z = look.zoom
  const ink = ghostInk(look.colors.get(g.fairyId) ?? null)
  const pad = 6 / z
  const frame = frameOf(box, z)
  const children: VNode[] = []
  let veil = false
  if (g.op === 'update' && g.current !== null) {
    // Where the shape is now, linked to where it would go (when it moves).
    const now = shapeBounds(g.current)
    const from = { x: now.x + now.w / 2, y: now.y + now.h / 2 }
    const to = { x: box.x + box.w / 2, y: box.y + box.h / 2 }
    veil = Math.hypot(to.x - from.x, to.y - from.y) <= 2 && Math.abs(now.w - box.w) <= 2 && Math.abs(now.h - box.h) <= 2
    if (Math.hypot(to.x - from.x, to.y - from.y) > 2) {
      children.push(h('rect', {
        class: 'ghost-was', x: f(now.x - pad), y: f(now.y - pad), width: f(now.w + 2 * pad), height: f(now.h + 2 * pad),
        fill: 'none', stroke: ink.stroke, 'stroke-width': f(1 / z), 'stroke-dasharray': `${f(3 / z)} ${f(3 / z)}`, 'pointer-events': 'none'
      }))
      children.push(h('line', {
        class: 'ghost-link', x1: f(from.x), y1: f(from.y), x2: f(to.x), y2: f(to.y),
        stroke: ink.stroke, 'stroke-width': f(1.5 / z), 'stroke-dasharray': `${f(4 / z)} ${f(4 / z)}`, 'pointer-events': 'none'
      }))
    }
  }
  // A change in place: the current shape shows faintly through a veil under the new look.
  if (veil) {
    children.push(h('rect', {
      class: 'ghost-veil', x: f(frame.x), y: f(frame.y), width: f(frame.w), height: f(frame.h), rx: f(4 / z),
      fill: '#fff', 'fill-opacity': 0.8, 'pointer-events': 'none'
    }))
  }
  children.push(h('rect', {
    class: 'ghost-frame', x: f(frame.x), y: f(frame.y), width: f(frame.w), height: f(frame.h), rx: f(4 / z),
    fill: ink.fill, 'fill-opacity': 0.14, stroke: ink.stroke, 'stroke-width': f(2 / z),
    'stroke-dasharray': `${f(7 / z)} ${f(5 / z)}`, 'pointer-events': 'all'
  }))
  if (g.proposed !== null) {
    children.push(h('g', { class: 'ghost-look', opacity: 0.55, 'pointer-events': 'none' }, [ghostIds(renderShape(g.proposed))]))
  } else {
    // A delete: the shape as it is, crossed out.
    children.push(h('path', {
      class: 'ghost-cross', d: `M${f(box.x)},${f(box.y)} L${f(box.x + box.w)},${f(box.y + box.h)} M${f(box.x + box.w)},${f(box.y)} L${f(box.x)},${f(box.y + box.h)}`,
      stroke: ink.stroke, 'stroke-width': f(3 / z), 'stroke-linecap': 'round', fill: 'none', 'pointer-events': 'none'
    }))
  }
  const name = look.names.get(g.fairyId) ?? 'a fairy'
  children.push(h('text', {
    class: 'ghost-label', x: f(frame.x), y: f(frame.y - 5 / z), 'font-size': f(11 / z), fill: ink.stroke,
    'font-family': 'system-ui, sans-serif', 'pointer-events': 'none'
  }, [`${name} suggests: ${opWord(g.op)}`]))
  const selected = look.selected === g.id
  return h('g', {
    class: `ghost op-${g.op}`,
    'data-suggestion': g.id,
    'data-op': g.op,
    'data-suggestion-fairy': g.fairyId,
    'data-request': g.requestId !== '' ? g.requestId : undefined,
    'data-selected': selected ? 'true' : undefined,
    'data-hovered': look.hovered === g.id ? 'true' : undefined,
    'data-busy': look.busy.has(g.id) ? 'true' : undefined,
    'data-streaming': g.streaming ? 'true' : undefined
  }, children)
}

/** Every ghost, oldest below; above them all, the buttons of the hovered and the selected one (not while busy). */
export function renderGhosts (list: readonly Ghost[], look: GhostLook): VNode {
  const bodies = list.flatMap(g => {
    const v = renderGhost(g, look)
    return v !== null ? [v] : []
  })
  const shown = new Set([look.selected, look.hovered])
  const actions = list.flatMap(g => {
    if (!shown.has(g.id) || look.busy.has(g.id)) return []
    const v = renderGhostActions(g, look.zoom, look.view)
    return v !== null ? [v] : []
  })
  return h('g', { class: 'ghosts' }, [...bodies, ...actions])
}
