// Read-only views of the fairy layer's document roots: `fairies` (entity and chat), `projects`
// and `tasks`, for the fairy panels, the sprites and the task frames. Reading is defensive: the
// document is shared, so any value may be anything. Nothing here writes the document.
import * as Y from 'yjs'
import type { Box } from './geometry.js'
import { isColorName, swatch } from './palette.js'

/**
 * One chat item `{from, role, text, at}`; `requestId` when the server ties it to a fairy
 * request (then it can be rejected); `rejected` when it is the server's item saying that
 * request was taken back (`acceptance: "rejected"`, what the server writes).
 */
export interface ChatItem { from: string, role: string, text: string, at: number, requestId: string | null, rejected: boolean, usage?: ChatUsage }
/**
 * What a request's model calls used, on the request's last chat item (`usage`, written by the
 * server when the request ends): the names of `GET /rooms/{room}/usage` totals; `costUsd` only
 * when a call was priced.
 */
export interface ChatUsage {
  calls: number, inputTokens: number, outputTokens: number, cacheReadInputTokens: number, cacheCreationInputTokens: number, costUsd?: number
}
/** A fairy's entity in the document: name, hat and chat. */
export interface FairyChat { id: string, name: string, hat: string, chat: ChatItem[] }
/**
 * A project (`projects` root, written by src/agent/projects/doc.rs): its title, colour (CSS),
 * member fairy ids (`members: [{id, role}]`, the leader first), its leader and its status
 * (`planning`, `active`, `done`, `aborted`).
 */
export interface Project { id: string, title: string, color: string, members: string[], orchestratorId: string, status: string }
/** A task's frame on the canvas: its bounds and what its label says. */
export interface TaskFrame { id: string, title: string, status: string, assignee: string, box: Box }
/** A task (`tasks` root), with its frame on the canvas when it has finite bounds. */
export interface Task { id: string, title: string, status: string, assignedTo: string, projectId: string | null, frame: TaskFrame | null }

/** Most chat items shown per fairy (the newest). */
export const CHAT_LIMIT = 50

function s (v: unknown, fallback = ''): string {
  return typeof v === 'string' ? v : fallback
}
function n (v: unknown): number | null {
  return typeof v === 'number' && Number.isFinite(v) ? v : null
}
function plain (v: unknown): Record<string, unknown> | null {
  if (v instanceof Y.Map) return (v as Y.Map<unknown>).toJSON()
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? v as Record<string, unknown> : null
}
const CSS_HEX = /^#[0-9a-fA-F]{3,8}$/

/** A project colour as CSS: a tldraw colour name, or a hex colour; anything else is `null`. */
export function projectCss (v: unknown): string | null {
  if (isColorName(v)) return swatch(v).solid
  return typeof v === 'string' && CSS_HEX.test(v) ? v : null
}

/** Reads a chat item's `usage`; `null` unless it is an object with a finite, non-negative `calls`. */
export function readChatUsage (v: unknown): ChatUsage | null {
  const p = plain(v)
  if (p === null) return null
  const count = (x: unknown): number => { const k = n(x); return k !== null && k >= 0 ? k : 0 }
  const calls = n(p.calls)
  if (calls === null || calls < 0) return null
  const usage: ChatUsage = {
    calls,
    inputTokens: count(p.inputTokens),
    outputTokens: count(p.outputTokens),
    cacheReadInputTokens: count(p.cacheReadInputTokens),
    cacheCreationInputTokens: count(p.cacheCreationInputTokens)
  }
  const cost = n(p.costUsd)
  if (cost !== null && cost >= 0) usage.costUsd = cost
  return usage
}

/** Reads one chat item; `null` when it is not an object. */
export function readChatItem (it: unknown): ChatItem | null {
  const p = plain(it)
  if (p === null) return null
  const requestId = typeof p.requestId === 'string' && p.requestId !== '' ? p.requestId.slice(0, 100) : null
  const item: ChatItem = {
    from: s(p.from), role: s(p.role), text: s(p.text), at: n(p.at) ?? 0, requestId,
    rejected: p.acceptance === 'rejected'
  }
  const usage = readChatUsage(p.usage)
  if (usage !== null) item.usage = usage
  return item
}

/** Every fairy's name, hat and chat (the newest `CHAT_LIMIT` items each), sorted by name. */
export function readFairyChats (fairies: Y.Map<unknown>): FairyChat[] {
  const out: FairyChat[] = []
  fairies.forEach((value, id) => {
    if (!(value instanceof Y.Map)) return
    const m = value as Y.Map<unknown>
    const rawChat = m.get('chat')
    const items: unknown[] = rawChat instanceof Y.Array ? rawChat.toArray() : Array.isArray(rawChat) ? rawChat : []
    const chat: ChatItem[] = []
    for (const it of items.slice(-CHAT_LIMIT)) {
      const item = readChatItem(it)
      if (item !== null) chat.push(item)
    }
    out.push({ id, name: s(m.get('name'), id), hat: s(m.get('hat')), chat })
  })
  return out.sort((a, b) => a.name.localeCompare(b.name) || (a.id < b.id ? -1 : 1))
}

/** Whether a project status is live (`planning` or `active`): its members are busy with it. */
export function isLiveProject (status: string): boolean {
  return status === 'planning' || status === 'active'
}

/** Every project, sorted by title. */
export function readProjects (projects: Y.Map<unknown>): Project[] {
  const out: Project[] = []
  projects.forEach((value, id) => {
    const p = plain(value)
    if (p === null) return
    const members = Array.isArray(p.members)
      ? p.members.flatMap(m => {
        const mm = plain(m)
        return typeof m === 'string' ? [m] : mm !== null && typeof mm.id === 'string' ? [mm.id] : []
      })
      : []
    out.push({ id, title: s(p.title, id), color: projectCss(p.color) ?? '#ae3ec9', members, orchestratorId: s(p.orchestratorId, members[0] ?? ''), status: s(p.status) })
  })
  return out.sort((a, b) => a.title.localeCompare(b.title) || (a.id < b.id ? -1 : 1))
}

/**
 * The colour a fairy wears: its project's (the one its awareness names, else the live
 * project listing it as a member), or `null` when it works alone.
 */
export function fairyProjectColor (fairyId: string, projectId: string | null, projects: Project[]): string | null {
  const byId = projectId !== null ? projects.find(p => p.id === projectId) : undefined
  if (byId !== undefined && isLiveProject(byId.status)) return byId.color
  return projects.find(p => isLiveProject(p.status) && p.members.includes(fairyId))?.color ?? null
}

/**
 * Every task, and its frame on the canvas when it has finite bounds. A task of an aborted
 * project (`projects`) that was not done reads as `aborted`, without a frame: disbanding leaves
 * its tasks as they were in the document, and the project is over.
 */
export function readTasks (tasks: Y.Map<unknown>, projects: readonly Project[] = []): Task[] {
  const aborted = new Set(projects.filter(p => p.status === 'aborted').map(p => p.id))
  const out: Task[] = []
  tasks.forEach((value, id) => {
    const p = plain(value)
    if (p === null) return
    const title = s(p.title, id)
    const projectId = typeof p.projectId === 'string' && p.projectId !== '' ? p.projectId : null
    const given = s(p.status, 'todo')
    const ended = projectId !== null && aborted.has(projectId) && given !== 'done'
    const status = ended ? 'aborted' : given
    const assignedTo = s(p.assignedTo)
    const x = n(p.x); const y = n(p.y); const w = n(p.w); const h = n(p.h)
    const frame = !ended && x !== null && y !== null && w !== null && h !== null && w > 0 && h > 0
      ? { id, title, status, assignee: assignedTo, box: { x, y, w, h } }
      : null
    out.push({ id, title, status, assignedTo, projectId, frame })
  })
  return out.sort((a, b) => a.title.localeCompare(b.title) || (a.id < b.id ? -1 : 1))
}

/** Tasks grouped by project (in the projects' order), then the tasks of no known project. */
export function groupTasks (tasks: Task[], projects: Project[]): Array<{ project: Project | null, tasks: Task[] }> {
  const groups: Array<{ project: Project | null, tasks: Task[] }> = []
  const known = new Set(projects.map(p => p.id))
  for (const p of projects) {
    const mine = tasks.filter(t => t.projectId === p.id)
    if (mine.length > 0) groups.push({ project: p, tasks: mine })
  }
  const rest = tasks.filter(t => t.projectId === null || !known.has(t.projectId))
  if (rest.length > 0) groups.push({ project: null, tasks: rest })
  return groups
}
