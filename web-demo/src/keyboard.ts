// Pure helpers for the page's keyboard and small-screen behaviour: the order in which the
// canvas's roving focus visits shapes, the step from one to the next, the zoom label, and
// whether the sidebar starts collapsed. No DOM here (unit-tested in Node); the canvas and
// main.ts apply them.
import type { Shape } from '@fairyring/client'
import { shapeBounds, type Box } from './geometry.js'

/** Below this viewport width (CSS px) the sidebar starts collapsed, behind its toggle. */
export const NARROW_WIDTH = 1000

/** Whether the sidebar starts collapsed on a viewport `width` px wide. */
export function sidebarCollapsedFor (width: number): boolean {
  return width < NARROW_WIDTH
}

/** The zoom as the toolbar shows it: `1.25` → `125%`. */
export function zoomLabel (zoom: number): string {
  return Number.isFinite(zoom) && zoom > 0 ? `${Math.round(zoom * 100)}%` : '100%'
}

/**
 * The order the keyboard visits shapes in: reading order of their bounds (top to bottom, then
 * left to right; shapes whose tops are within `rowSlop` page px count as one row), ties by id so
 * every browser agrees.
 */
export function focusOrder (shapes: readonly Shape[], rowSlop = 24): string[] {
  const boxes = shapes.map(s => ({ id: s.id, b: shapeBounds(s) }))
  boxes.sort((p, q) => p.b.y - q.b.y)
  // Group into rows: a shape joins the row whose first top is within `rowSlop` of its own.
  const rows: Array<Array<{ id: string, b: Box }>> = []
  for (const item of boxes) {
    const row = rows[rows.length - 1]
    const top = row?.[0]?.b.y
    if (row !== undefined && top !== undefined && item.b.y - top <= rowSlop) row.push(item)
    else rows.push([item])
  }
  return rows.flatMap(r => r.sort((p, q) => p.b.x - q.b.x || (p.id < q.id ? -1 : p.id > q.id ? 1 : 0)).map(i => i.id))
}

/**
 * The shape focused after one step from `current` (`step` 1: next, -1: previous). With `wrap`
 * (arrow keys) the ends wrap around; without (Tab) stepping past an end gives `null`, so focus
 * leaves the canvas. From no (or a vanished) current shape the first step lands on the first
 * shape (the last going back).
 */
export function stepFocus (order: readonly string[], current: string | null, step: 1 | -1, wrap: boolean): string | null {
  if (order.length === 0) return null
  const at = current === null ? -1 : order.indexOf(current)
  if (at < 0) return step === 1 ? order[0] ?? null : order[order.length - 1] ?? null
  const next = at + step
  if (next >= 0 && next < order.length) return order[next] ?? null
  if (!wrap) return null
  return order[(next + order.length) % order.length] ?? null
}

/** Words for the canvas's accessible name with shape `id` focused (`null`: none). */
export function focusDescription (shapes: readonly Shape[], order: readonly string[], id: string | null, selected: readonly string[]): string {
  if (id === null || order.length === 0) return order.length === 0 ? 'canvas, empty' : `canvas, ${order.length} shapes: Tab or arrows to move between them, Enter to select`
  const s = shapes.find(x => x.id === id)
  const what = s?.type ?? 'shape'
  const text = s !== undefined && 'text' in s && s.text.trim() !== '' ? ` "${s.text.trim().slice(0, 40)}"` : ''
  const state = s?.locked === true ? ', being drawn by a fairy' : selected.includes(id) ? ', selected' : ''
  return `${what}${text}${state}, ${order.indexOf(id) + 1} of ${order.length}`
}
