// The page's model of the fairies in the room, as pure functions: who is here (the document's
// `fairies` root and awareness together), which of them this browser has selected, what each
// sprite looks like (each fairy's own colour from its id, distinct for a room's first eight), how
// a sprite glides between awareness updates, where a fairy this browser invites appears, who
// said a chat line, whose thread the chat shows and what Enter does with several selected.
// No DOM, no network: the panels, the canvas and the API client use these.
import type { ChatItem, FairyChat, Project } from '@fairyring/client'
import { fairyProjectColor } from '@fairyring/client'
import type { PeerFairy, Pose, TodoItem } from '@fairyring/client'
import type { Box, Point } from './geometry.js'

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
  /** Its own colour (`fairyColors`): its list dot, chat name, tab, and its sprite and ghosts outside a project. */
  own: string
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
  const own = fairyColors([...entities.map(e => e.id), ...peers.map(p => p.id)])
  const ownOf = (id: string): string => own.get(id) ?? FAIRY_PALETTE[0] ?? '#db2777'
  for (const e of entities) {
    byId.set(e.id, { id: e.id, name: e.name, hat: e.hat, mode: 'idling', pose: 'idle', todo: [], color: fairyProjectColor(e.id, null, projects), own: ownOf(e.id), present: false })
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
      own: ownOf(p.id),
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

/**
 * The fairies' own colours: eight hues far enough apart to tell at a glance (pink, blue, green,
 * orange, violet, teal, red, ochre), each readable on white.
 */
export const FAIRY_PALETTE: readonly string[] = [
  '#e64980', '#1c7ed6', '#2f9e44', '#f76707', '#7048e8', '#0c8599', '#c92a2a', '#8d6e00'
]

/** A 32-bit FNV-1a hash of `s` (stable across browsers and runs). */
export function hashId (s: string): number {
  let h = 0x811c9dc5
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i)
    h = Math.imul(h, 0x01000193) >>> 0
  }
  return h >>> 0
}

/**
 * Each fairy's own colour, the same in every browser: its id's hashed slot of `FAIRY_PALETTE`,
 * or the next free one when an earlier fairy (in id order) holds it, so the first
 * `FAIRY_PALETTE.length` fairies of a room all differ; past that colours repeat.
 */
export function fairyColors (ids: Iterable<string>, palette: readonly string[] = FAIRY_PALETTE): Map<string, string> {
  const out = new Map<string, string>()
  const n = palette.length
  if (n === 0) return out
  const taken = new Set<number>()
  for (const id of [...new Set(ids)].sort()) {
    let slot = hashId(id) % n
    if (taken.size < n) {
      while (taken.has(slot)) slot = (slot + 1) % n
      taken.add(slot)
    }
    out.set(id, palette[slot] ?? palette[0] ?? '#db2777')
  }
  return out
}

/**
 * Where the `index`-th fairy of a room (0 for the first) appears when this browser invites it:
 * on a ring around the centre of the inviter's view (a third of its smaller side, at least
 * 80 px), eight spots a ring, each further ring wider and turned half a step, so fairies
 * invited one after another never land on one spot and stay in view.
 */
export function spawnPoint (view: Box, index: number): Point {
  const i = Math.max(0, Math.floor(Number.isFinite(index) ? index : 0))
  const cx = view.x + view.w / 2
  const cy = view.y + view.h / 2
  const ring = Math.floor(i / 8)
  const base = Math.max(80, Math.min(view.w, view.h) / 3)
  const r = base * (1 + 0.3 * ring)
  // The first spot is up and to the left of the centre: the middle stays free for the drawing.
  const angle = -3 * Math.PI / 4 + (i % 8) * (Math.PI / 4) + (ring % 2) * (Math.PI / 8)
  return { x: Math.round(cx + r * Math.cos(angle)), y: Math.round(cy + r * Math.sin(angle)) }
}

/**
 * The first spawn spot (`spawnPoint` 0, 1, …) at least `gap` px from every fairy already in the
 * room (`taken`: where they are now), so a fairy invited after one left does not land on another.
 */
export function freeSpawnPoint (view: Box, taken: readonly Point[], gap = 60): Point {
  for (let i = 0; i < 64; i++) {
    const p = spawnPoint(view, i)
    if (taken.every(t => Math.hypot(t.x - p.x, t.y - p.y) >= gap)) return p
  }
  return spawnPoint(view, taken.length)
}

/** What Enter in the chat input does with the selected fairies. */
export type EnterAction =
  | { kind: 'prompt', to: string }
  | { kind: 'project', fairyIds: string[] }
  | { kind: 'none', why: string }

/**
 * Enter in the chat input: one selected fairy (or the only one in the room) is prompted; two
 * or more selected start a project (the first selected leads) — the same message is never
 * sent to each of them, which gave identical drawings stacked on each other.
 */
export function enterAction (selected: readonly string[], present: readonly string[]): EnterAction {
  const here = new Set(present)
  const chosen = [...new Set(selected)].filter(id => here.has(id))
  if (chosen.length >= 2) return { kind: 'project', fairyIds: chosen }
  const one = chosen[0] ?? (present.length === 1 ? present[0] : undefined)
  if (one !== undefined) return { kind: 'prompt', to: one }
  return { kind: 'none', why: present.length === 0 ? 'Invite a fairy first, then talk to it here.' : 'Select a fairy (click it) to talk to it.' }
}

/**
 * Whose thread the chat shows: the tab this browser picked (while that fairy is here), else the
 * first selected fairy, else the one that spoke last, else the first; `null` without fairies.
 */
export function shownThread (chats: readonly FairyChat[], selected: readonly string[], picked: string | null): string | null {
  const ids = new Set(chats.map(c => c.id))
  if (picked !== null && ids.has(picked)) return picked
  const first = selected.find(id => ids.has(id))
  if (first !== undefined) return first
  let latest: FairyChat | null = null
  let at = -Infinity
  for (const c of chats) {
    const last = c.chat[c.chat.length - 1]
    if (last !== undefined && last.at > at) { at = last.at; latest = c }
  }
  return latest?.id ?? chats[0]?.id ?? null
}
