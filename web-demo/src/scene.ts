// Drawing one frame: the shapes (with the live preview of the gesture in progress), pending
// suggestions (ghosts), selections, task frames, fairies and cursors, into the canvas layers.
// Reads state; changes nothing.
import type * as Y from 'yjs'
import type { Awareness } from 'y-protocols/awareness'
import { MAIN_PAGE, type Shape } from '@fairyring/client'
import { boxFromCorners, type Box, type Camera, type Point } from './geometry.js'
import { renderShape } from './render.js'
import {
  previewStroke, renderBrush, renderCursors, renderFairies, renderOwnSelection, renderPeerSelections,
  renderTaskFrames, translateShape, withBox, type FairySprite
} from './overlay.js'
import { readPeers } from '@fairyring/client'
import { readProjects, readTasks } from '@fairyring/client'
import { renderGhosts, type GhostLook } from './ghosts.js'
import type { Ghost } from '@fairyring/client'
import { h, toDom, type VNode } from './vnode.js'

/** The pointer gesture in progress; it becomes one transaction when the pointer is released. */
export type Gesture =
  | { kind: 'pan', startScreen: Point, startCam: Camera }
  | { kind: 'move', start: Point, ids: string[], dx: number, dy: number }
  | { kind: 'resize', start: Point, id: string, box: Box, preview: Box }
  | { kind: 'brush', start: Point, box: Box }
  | { kind: 'create-geo', start: Point, end: Point, type: string }
  | { kind: 'create-link', start: Point, end: Point, type: 'arrow' | 'line' }
  | { kind: 'draw', points: Point[] }

/** The SVG groups a frame is drawn into (`world` is in page space, `cursors` in screen space). */
export interface Layers {
  world: SVGGElement, tasks: SVGGElement, shapes: SVGGElement, suggestions: SVGGElement, overlay: SVGGElement, fairies: SVGGElement, cursors: SVGGElement
}

/** What a frame shows. */
export interface SceneState {
  cam: Camera
  shapes: Shape[]
  gesture: Gesture | null
  selection: string[]
  style: { color: string, fill: string }
  awareness: Awareness
  tasks: Y.Map<unknown>
  /** The `projects` root: the tasks of an aborted project get no frame. */
  projects: Y.Map<unknown>
  /** The fairy sprites as they are drawn this frame. */
  sprites: FairySprite[]
  /** Display names by id (fairy ids and people's subs), for task frame labels. */
  names: ReadonlyMap<string, string>
  /** The pending suggestions, and how to draw them. */
  ghosts: Ghost[]
  ghostLook: GhostLook
}

/** The shapes as they should look now, including the live preview of a move or resize. */
export function displayShapes (shapes: Shape[], g: Gesture | null): Shape[] {
  if (g?.kind === 'move') {
    const ids = new Set(g.ids)
    return shapes.map(s => (ids.has(s.id) && !s.locked ? translateShape(s, g.dx, g.dy) : s))
  }
  if (g?.kind === 'resize') return shapes.map(s => (s.id === g.id ? withBox(s, g.preview) : s))
  return shapes
}

/** Draws one frame. */
export function drawScene (layers: Layers, st: SceneState): void {
  const cam = st.cam
  layers.world.setAttribute('transform', `scale(${cam.zoom}) translate(${-cam.x},${-cam.y})`)
  const shown = displayShapes(st.shapes, st.gesture)
  const shownById = new Map(shown.map(s => [s.id, s]))
  layers.shapes.replaceChildren(...shown.map(s => toDom(renderShape(s))))
  layers.suggestions.replaceChildren(toDom(renderGhosts(st.ghosts, st.ghostLook)))

  const { users } = readPeers(st.awareness.getStates() as Map<number, unknown>, st.awareness.clientID)
  const overlay: VNode[] = [
    renderPeerSelections(users, shownById, cam.zoom),
    renderOwnSelection(st.selection.map(id => shownById.get(id)).filter((s): s is Shape => s !== undefined), cam.zoom)
  ]
  const g = st.gesture
  if (g?.kind === 'brush') overlay.push(renderBrush(g.box, cam.zoom))
  if (g?.kind === 'create-geo') {
    const b = boxFromCorners(g.start, g.end)
    overlay.push(renderShape({
      id: '__preview', kind: 'geo', type: g.type, pageId: MAIN_PAGE, x: b.x, y: b.y, w: Math.max(1, b.w), h: Math.max(1, b.h),
      rotation: 0, index: '', color: st.style.color, fill: st.style.fill, note: '', locked: false, createdBy: '', text: '', textAlign: 'middle'
    }))
  }
  if (g?.kind === 'create-link') {
    overlay.push(renderShape({
      id: '__preview', kind: 'link', type: g.type, pageId: MAIN_PAGE, x: g.start.x, y: g.start.y, x1: g.start.x, y1: g.start.y,
      x2: g.end.x, y2: g.end.y, fromId: null, toId: null, bend: 0, text: '', rotation: 0, index: '', color: st.style.color,
      fill: 'none', note: '', locked: false, createdBy: ''
    }))
  }
  if (g?.kind === 'draw') {
    const s = previewStroke(g.points, st.style.color)
    if (s !== null) overlay.push(renderShape(s))
  }
  // Previews are not shapes yet: keep them out of `[data-shape-id]` queries.
  layers.overlay.replaceChildren(...overlay.map(v => toDom(stripPreviewIds(v))))
  layers.tasks.replaceChildren(toDom(renderTaskFrames(
    readTasks(st.tasks, readProjects(st.projects)).flatMap(t => (t.frame !== null ? [t.frame] : [])), cam.zoom, st.names)))
  drawFairies(layers, st.sprites, st.ghostLook.view)
  layers.cursors.replaceChildren(toDom(renderCursors(users, cam)))
}

/** Draws only the fairy sprites (the frames of a glide between two awareness updates), their bubbles inside `view`. */
export function drawFairies (layers: Layers, sprites: FairySprite[], view?: Box): void {
  layers.fairies.replaceChildren(toDom(renderFairies(sprites, view)))
}

function stripPreviewIds (v: VNode): VNode {
  if (v.attrs['data-shape-id'] !== '__preview') return v
  const { 'data-shape-id': _drop, ...rest } = v.attrs
  return h(v.tag, { ...rest, 'data-preview': 'true' }, v.children)
}
