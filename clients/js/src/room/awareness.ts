// Awareness (docs/protocol.md "Awareness"): what a person's client publishes and how other peers' states are read.
// Browser peers publish `{user, cursor, selection, viewport}`; fairies publish `{fairy: {...}}`.
// Reading is defensive: states come from the network and may be anything.
import type { Box, Point } from '../schema/geometry.js'

/** Who this browser is. */
export interface LocalUser { id: string, name: string, color: string }

/** This browser's awareness state, exactly as docs/protocol.md "Awareness" names the keys. */
export interface BrowserState {
  user: LocalUser
  cursor: Point | null
  selection: string[]
  viewport: Box
}

/** Another browser in the room. */
export interface PeerUser {
  clientId: number
  id: string
  name: string
  color: string
  cursor: Point | null
  selection: string[]
  /** The part of the page the person sees (`null` when they publish none). */
  viewport: Box | null
}

/** The poses a fairy's sprite can take (anything else reads as `idle`). */
export const POSES = ['idle', 'thinking', 'working', 'celebrating'] as const
export type Pose = typeof POSES[number]

/** One item of a fairy's personal todo list. */
export interface TodoItem { id: string, text: string, status: string }

/** A fairy in the room, as its awareness state `{fairy: {...}}` describes it. */
export interface PeerFairy {
  clientId: number
  id: string
  name: string
  x: number
  y: number
  mode: string
  pose: Pose
  flip: boolean
  projectId: string | null
  /** The thought of the moment (the server sends a string, older peers a boolean). */
  thinking: string
  lastMessage: string
  todo: TodoItem[]
  /** The task it works on (`null`: none). */
  taskId: string | null
  /** Its task list as it publishes it (at most 50). */
  tasks: FairyTaskItem[]
}

/** One task of a fairy's published task list. */
export interface FairyTaskItem { id: string, title: string, status: string }

function isObj (v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}
function finite (v: unknown): number | null {
  return typeof v === 'number' && Number.isFinite(v) ? v : null
}
function text (v: unknown, fallback: string, max = 60): string {
  return typeof v === 'string' && v.trim() !== '' ? v.slice(0, max) : fallback
}
const CSS_COLOR = /^(#[0-9a-fA-F]{3,8}|[a-z-]{3,20})$/

function readPose (v: unknown): Pose {
  return (POSES as readonly unknown[]).includes(v) ? v as Pose : 'idle'
}

/** Reads a todo list (at most 50 items; malformed items are skipped). */
export function readTodo (v: unknown): TodoItem[] {
  if (!Array.isArray(v)) return []
  const out: TodoItem[] = []
  for (const it of v.slice(0, 50)) {
    if (!isObj(it) || typeof it.text !== 'string') continue
    out.push({ id: text(it.id, String(out.length), 80), text: it.text.slice(0, 200), status: text(it.status, 'todo', 20) })
  }
  return out
}

/** Reads a fairy's published task list (at most 50 items; malformed items are skipped). */
export function readFairyTasks (v: unknown): FairyTaskItem[] {
  if (!Array.isArray(v)) return []
  const out: FairyTaskItem[] = []
  for (const it of v.slice(0, 50)) {
    if (!isObj(it)) continue
    const id = text(it.id, '', 100)
    if (id === '') continue
    out.push({ id, title: text(it.title, text(it.text, id, 200), 200), status: text(it.status, 'todo', 20) })
  }
  return out
}

/** Reads a viewport `{x, y, w, h}` with a positive size; anything else is `null`. */
export function readBox (v: unknown): Box | null {
  if (!isObj(v)) return null
  const x = finite(v.x); const y = finite(v.y); const w = finite(v.w); const h = finite(v.h)
  return x !== null && y !== null && w !== null && h !== null && w > 0 && h > 0 ? { x, y, w, h } : null
}

/** Reads a cursor `{x, y}`; anything else is "no cursor". */
export function readPoint (v: unknown): Point | null {
  if (!isObj(v)) return null
  const x = finite(v.x)
  const y = finite(v.y)
  return x !== null && y !== null ? { x, y } : null
}

/** Splits awareness states into other browsers and fairies, ignoring ours and malformed ones. */
export function readPeers (states: Map<number, unknown>, selfId: number): { users: PeerUser[], fairies: PeerFairy[] } {
  const users: PeerUser[] = []
  const fairies: PeerFairy[] = []
  for (const [clientId, state] of states) {
    if (clientId === selfId || !isObj(state)) continue
    if (isObj(state.fairy)) {
      const fy = state.fairy
      fairies.push({
        clientId,
        id: text(fy.id, String(clientId)),
        name: text(fy.name, 'fairy'),
        x: finite(fy.x) ?? 0,
        y: finite(fy.y) ?? 0,
        mode: text(fy.mode, 'idling'),
        pose: readPose(fy.pose),
        flip: fy.flip === true,
        projectId: typeof fy.projectId === 'string' && fy.projectId !== '' ? fy.projectId : null,
        thinking: typeof fy.thinking === 'string' ? fy.thinking.slice(0, 200) : fy.thinking === true ? '…' : '',
        lastMessage: text(fy.lastMessage, '', 200),
        todo: readTodo(fy.todo),
        taskId: typeof fy.taskId === 'string' && fy.taskId !== '' ? fy.taskId.slice(0, 100) : null,
        tasks: readFairyTasks(fy.tasks)
      })
    } else if (isObj(state.user)) {
      const u = state.user
      const color = typeof u.color === 'string' && CSS_COLOR.test(u.color) ? u.color : '#4465e9'
      const selection = Array.isArray(state.selection)
        ? state.selection.filter((s): s is string => typeof s === 'string').slice(0, 1000)
        : []
      users.push({
        clientId,
        id: text(u.id, String(clientId)),
        name: text(u.name, 'anonymous', 40),
        color,
        cursor: readPoint(state.cursor),
        selection,
        viewport: readBox(state.viewport)
      })
    }
  }
  users.sort((a, b) => a.name.localeCompare(b.name) || a.clientId - b.clientId)
  fairies.sort((a, b) => a.name.localeCompare(b.name) || a.clientId - b.clientId)
  return { users, fairies }
}

/** The awareness of a room (y-protocols' `Awareness`, as far as these helpers use it). */
export interface AwarenessLike {
  clientID: number
  getLocalState: () => Record<string, unknown> | null
  setLocalState: (state: Record<string, unknown> | null) => void
  getStates: () => Map<number, unknown>
}

/** Publishes this person's presence, keeping the keys not given (`{user, cursor, selection, viewport}`). */
export function publishPresence (awareness: AwarenessLike, state: Partial<BrowserState>): void {
  const cur = awareness.getLocalState() ?? {}
  awareness.setLocalState({ ...cur, ...state })
}

/** The other people and the fairies of a room, from its awareness. */
export function peersOf (awareness: AwarenessLike): { users: PeerUser[], fairies: PeerFairy[] } {
  return readPeers(awareness.getStates(), awareness.clientID)
}
