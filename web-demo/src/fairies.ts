// The page's model of the fairies in the room, as pure functions: who is here (the document's
// `fairies` root and awareness together), which of them this browser has selected, what each
// sprite looks like, how a sprite glides between awareness updates, and who said a chat line.
// No DOM, no network: the panels, the canvas and the API client use these.
import type { ChatItem, FairyChat, Project } from '@fairyring/client'
import { fairyProjectColor } from '@fairyring/client'
import type { PeerFairy, Pose, TodoItem } from '@fairyring/client'
import type { Point } from './geometry.js'

/** A fairy as the page shows it: its entity (if in the document) and its presence (if any). */
export interface FairyView {
  id: string
  name: string
  hat: string
  mode: string
  pose: Pose
  todo: TodoItem[]
  /** Its project's colour, or `null` when it works alone. */
  color: string | null
  /** Whether its awareness state is here (it is hosted and visible on the canvas). */
  present: boolean
}

/** Modes in which a fairy is not working on anything (`idling` and a missing mode). */
export function isIdle (mode: string, pose: Pose): boolean {
  return (mode === 'idling' || mode === '') && pose !== 'thinking' && pose !== 'working'
}

/**
 * Every fairy of the room, from the document's `fairies` root and from awareness together
 * (either may be ahead of the other for a moment), sorted by name.
 */
export function mergeFairies (entities: FairyChat[], peers: PeerFairy[], projects: Project[]): FairyView[] {
  const byId = new Map<string, FairyView>()
  for (const e of entities) {
    byId.set(e.id, { id: e.id, name: e.name, hat: e.hat, mode: 'idling', pose: 'idle', todo: [], color: fairyProjectColor(e.id, null, projects), present: false })
  }
  for (const p of peers) {
    const known = byId.get(p.id)
    byId.set(p.id, {
      id: p.id,
      name: known?.name ?? p.name,
      hat: known?.hat ?? '',
      mode: p.mode,
      pose: p.pose,
      todo: p.todo,
      color: fairyProjectColor(p.id, p.projectId, projects),
      present: true
    })
  }
  return [...byId.values()].sort((a, b) => a.name.localeCompare(b.name) || (a.id < b.id ? -1 : 1))
}

/**
 * The selection after clicking fairy `id`: alone (a plain click), or added to / removed from
 * the others (`additive`, a shift-click). Several selected fairies are ready for a group prompt.
 */
export function nextSelection (current: readonly string[], id: string, additive: boolean): string[] {
  if (!additive) return [id]
  return current.includes(id) ? current.filter(x => x !== id) : [...current, id]
}

/** The selection without fairies that left the room (same array when nothing changed). */
export function keepPresent (current: string[], ids: ReadonlySet<string>): string[] {
  const kept = current.filter(id => ids.has(id))
  return kept.length === current.length ? current : kept
}

/** Time constant of a sprite's glide towards its latest awareness position, in milliseconds. */
export const GLIDE_MS = 90

/**
 * One animation step of a sprite gliding to `target` (exponential easing over `dtMs`; the
 * fairy's flight sends about ten positions a second, the page draws every frame in between).
 * Snaps when within half a pixel or after a jump that is not a flight (`teleport` or more).
 */
export function glide (current: Point, target: Point, dtMs: number, tauMs = GLIDE_MS, teleport = 3000): Point {
  const dx = target.x - current.x
  const dy = target.y - current.y
  if (!Number.isFinite(dx) || !Number.isFinite(dy) || Math.hypot(dx, dy) < 0.5 || Math.hypot(dx, dy) > teleport) return target
  const k = 1 - Math.exp(-Math.max(0, dtMs) / tauMs)
  return { x: current.x + dx * k, y: current.y + dy * k }
}

/** The name to show for a chat line's author: "you", a person's name from awareness, or the fairy's. */
export function chatAuthor (from: string, role: string, mySub: string, people: ReadonlyMap<string, string>, fairyName: string): string {
  if (role === 'fairy' || from.startsWith('fairy:')) return fairyName
  const sub = from.startsWith('user:') ? from.slice(5) : from
  if (sub === mySub) return 'you'
  return people.get(sub) ?? (sub !== '' ? sub : 'someone')
}

/** The `data-chat-role` of a chat item: `user` or `fairy` (the server's roles; others read as fairy). */
export function chatRole (role: string, from: string): 'user' | 'fairy' {
  return role === 'user' || (role === '' && from.startsWith('user:')) ? 'user' : 'fairy'
}

/**
 * Where the reject buttons go: the first chat item of each request (`requestId`), one button
 * per request whatever its role; and the requests shown as rejected (any of their items says so).
 */
export function requestMarks (chat: readonly ChatItem[]): { heads: Set<number>, rejected: Set<string> } {
  const heads = new Set<number>()
  const rejected = new Set<string>()
  const seen = new Set<string>()
  chat.forEach((item, i) => {
    if (item.requestId === null) return
    if (item.rejected) rejected.add(item.requestId)
    if (!seen.has(item.requestId)) { seen.add(item.requestId); heads.add(i) }
  })
  return { heads, rejected }
}
