// Read-only views of the fairy layer's document roots (SPEC §2 `fairies`, `tasks`), for the chat
// and task panels. The fairy layer arrives in a later issue; these panels show whatever it writes.
import * as Y from 'yjs'
import type { TaskFrame } from './overlay.js'

export interface ChatItem { from: string, role: string, text: string, at: number }
export interface FairyChat { id: string, name: string, chat: ChatItem[] }

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

/** Every fairy's name and chat, the newest 50 items each. */
export function readFairyChats (fairies: Y.Map<unknown>): FairyChat[] {
  const out: FairyChat[] = []
  fairies.forEach((value, id) => {
    if (!(value instanceof Y.Map)) return
    const m = value as Y.Map<unknown>
    const rawChat = m.get('chat')
    const items: unknown[] = rawChat instanceof Y.Array ? rawChat.toArray() : Array.isArray(rawChat) ? rawChat : []
    const chat: ChatItem[] = []
    for (const it of items.slice(-50)) {
      const p = plain(it)
      if (p === null) continue
      chat.push({ from: s(p.from), role: s(p.role), text: s(p.text), at: n(p.at) ?? 0 })
    }
    out.push({ id, name: s(m.get('name'), id), chat })
  })
  return out.sort((a, b) => a.name.localeCompare(b.name))
}

/** Every task, and its frame on the canvas when it has finite bounds. */
export function readTasks (tasks: Y.Map<unknown>): Array<{ id: string, title: string, status: string, assignedTo: string, frame: TaskFrame | null }> {
  const out: Array<{ id: string, title: string, status: string, assignedTo: string, frame: TaskFrame | null }> = []
  tasks.forEach((value, id) => {
    const p = plain(value)
    if (p === null) return
    const title = s(p.title, id)
    const status = s(p.status, 'todo')
    const x = n(p.x); const y = n(p.y); const w = n(p.w); const h = n(p.h)
    const frame = x !== null && y !== null && w !== null && h !== null && w > 0 && h > 0
      ? { id, title, status, box: { x, y, w, h } }
      : null
    out.push({ id, title, status, assignedTo: s(p.assignedTo), frame })
  })
  return out.sort((a, b) => a.title.localeCompare(b.title) || (a.id < b.id ? -1 : 1))
}
