// Page-space geometry: bounds, hit tests, arrow bends and the pan/zoom camera. Pure functions.
import { NOTE_SIZE, type Shape, type LinkShape, type Point, type Box } from '@fairyring/client'

export type { Point, Box }

/** The camera: page point `p` is drawn at screen `(p - (x, y)) * zoom`. */
export interface Camera { x: number, y: number, zoom: number }

export const MIN_ZOOM = 0.1
export const MAX_ZOOM = 8

/** Clamps a zoom factor to the supported range (and NaN to 1). */
export function clampZoom (z: number): number {
  if (!Number.isFinite(z)) return 1
  return Math.min(MAX_ZOOM, Math.max(MIN_ZOOM, z))
}

export function screenToPage (cam: Camera, p: Point): Point {
  return { x: p.x / cam.zoom + cam.x, y: p.y / cam.zoom + cam.y }
}

export function pageToScreen (cam: Camera, p: Point): Point {
  return { x: (p.x - cam.x) * cam.zoom, y: (p.y - cam.y) * cam.zoom }
}

/** Zooms to `zoom` keeping the page point under screen point `anchor` where it is. */
export function zoomAt (cam: Camera, anchor: Point, zoom: number): Camera {
  const z = clampZoom(zoom)
  const page = screenToPage(cam, anchor)
  return { x: page.x - anchor.x / z, y: page.y - anchor.y / z, zoom: z }
}

/** The page area a screen of `w × h` pixels shows (the awareness `viewport`). */
export function visibleBox (cam: Camera, w: number, h: number): Box {
  return { x: cam.x, y: cam.y, w: w / cam.zoom, h: h / cam.zoom }
}

/** The box spanned by two corners, in either order (a drag rectangle). */
export function boxFromCorners (a: Point, b: Point): Box {
  return { x: Math.min(a.x, b.x), y: Math.min(a.y, b.y), w: Math.abs(a.x - b.x), h: Math.abs(a.y - b.y) }
}

/** Rough text extent (the browser measures nothing here, so selection boxes stay deterministic). */
export function textBox (text: string, fontSize: number, maxWidth: number | null): { w: number, h: number } {
  const lines = text.split('\n')
  const longest = lines.reduce((m, l) => Math.max(m, l.length), 1)
  const natural = longest * fontSize * 0.6
  const w = maxWidth !== null ? Math.min(natural, maxWidth) : natural
  const wrapped = maxWidth !== null && natural > maxWidth ? Math.ceil(natural / maxWidth) : 1
  return { w: Math.max(w, fontSize), h: Math.max(lines.length, wrapped) * fontSize * 1.3 }
}

/** The control point of a bent arrow: `bend` page units off the midpoint, to the left of travel. */
export function bendControl (l: Pick<LinkShape, 'x1' | 'y1' | 'x2' | 'y2' | 'bend'>): Point {
  const mx = (l.x1 + l.x2) / 2
  const my = (l.y1 + l.y2) / 2
  const dx = l.x2 - l.x1
  const dy = l.y2 - l.y1
  const len = Math.hypot(dx, dy)
  if (len === 0 || l.bend === 0) return { x: mx, y: my }
  // The quadratic curve passes through mid + bend * normal when the control is at twice that.
  const nx = dy / len
  const ny = -dx / len
  return { x: mx + nx * l.bend * 2, y: my + ny * l.bend * 2 }
}

/** The page-space bounding box of a shape (rotation ignored). */
export function shapeBounds (s: Shape): Box {
  switch (s.kind) {
    case 'geo': return { x: s.x, y: s.y, w: s.w, h: s.h }
    case 'note': return { x: s.x, y: s.y, w: NOTE_SIZE, h: NOTE_SIZE }
    case 'text': {
      const t = textBox(s.text || ' ', s.fontSize, s.maxWidth)
      return { x: s.x, y: s.y, w: t.w, h: t.h }
    }
    case 'link': {
      const c = bendControl(s)
      const xs = [s.x1, s.x2, (s.x1 + s.x2) / 2 + (c.x - (s.x1 + s.x2) / 2) / 2]
      const ys = [s.y1, s.y2, (s.y1 + s.y2) / 2 + (c.y - (s.y1 + s.y2) / 2) / 2]
      const x = Math.min(...xs)
      const y = Math.min(...ys)
      return { x, y, w: Math.max(...xs) - x, h: Math.max(...ys) - y }
    }
    case 'draw': {
      if (s.points.length < 2) return { x: s.x, y: s.y, w: 0, h: 0 }
      let minX = Infinity; let minY = Infinity; let maxX = -Infinity; let maxY = -Infinity
      for (let i = 0; i + 1 < s.points.length; i += 2) {
        const px = s.points[i] ?? 0
        const py = s.points[i + 1] ?? 0
        minX = Math.min(minX, px); maxX = Math.max(maxX, px)
        minY = Math.min(minY, py); maxY = Math.max(maxY, py)
      }
      return { x: s.x + minX, y: s.y + minY, w: maxX - minX, h: maxY - minY }
    }
  }
}

/** Whether `p` lies within `box` grown by `slop` on every side. */
export function boxContains (box: Box, p: Point, slop = 0): boolean {
  return p.x >= box.x - slop && p.x <= box.x + box.w + slop && p.y >= box.y - slop && p.y <= box.y + box.h + slop
}

/** Whether two boxes overlap. */
export function boxesOverlap (a: Box, b: Box): boolean {
  return a.x <= b.x + b.w && b.x <= a.x + a.w && a.y <= b.y + b.h && b.y <= a.y + a.h
}

/** The union of boxes, or `null` for none. */
export function unionBox (boxes: Box[]): Box | null {
  if (boxes.length === 0) return null
  let minX = Infinity; let minY = Infinity; let maxX = -Infinity; let maxY = -Infinity
  for (const b of boxes) {
    minX = Math.min(minX, b.x); minY = Math.min(minY, b.y)
    maxX = Math.max(maxX, b.x + b.w); maxY = Math.max(maxY, b.y + b.h)
  }
  return { x: minX, y: minY, w: maxX - minX, h: maxY - minY }
}

/** Normalizes a resize drag: the dragged corner may cross the fixed one; sizes stay ≥ `min`. */
export function resizeBox (start: Box, dx: number, dy: number, min = 4): Box {
  const x2 = start.x + start.w + dx
  const y2 = start.y + start.h + dy
  const b = boxFromCorners({ x: start.x, y: start.y }, { x: x2, y: y2 })
  return { x: b.x, y: b.y, w: Math.max(min, b.w), h: Math.max(min, b.h) }
}
