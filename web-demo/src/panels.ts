// The side panels and bars (DOM only): toolbar state, style panel, people list, the fairy chat
// and task panels (read-only places for the fairy layer), the status bar and the banner.
import * as Y from 'yjs'
import type { Awareness } from 'y-protocols/awareness'
import { readPeers, type LocalUser } from './presence.js'
import { readFairyChats, readTasks } from './fairydoc.js'
import { roots } from './ops.js'
import type { ConnState } from './connection.js'

function el<K extends keyof HTMLElementTagNameMap> (tag: K, attrs: Record<string, string> = {}, text?: string): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag)
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v)
  if (text !== undefined) e.textContent = text
  return e
}

/** Shows the connection state (`data-status` is what tests wait on). */
export function setStatus (node: HTMLElement, state: ConnState, detail = ''): void {
  node.dataset.status = state
  const words: Record<ConnState, string> = {
    connecting: 'Connecting…', connected: 'Connected', offline: 'Offline: reconnecting…', refused: 'Not connected'
  }
  node.textContent = detail !== '' ? `${words[state]} · ${detail}` : words[state]
}

/** Shows (or, with `null`, hides) the banner; `action` adds one button. */
export function setBanner (node: HTMLElement, message: string | null, action?: { label: string, run: () => void }): void {
  if (message === null) { node.hidden = true; node.replaceChildren(); return }
  node.hidden = false
  node.replaceChildren(el('span', {}, message))
  if (action !== undefined) {
    const b = el('button', { type: 'button', 'data-action': 'banner' }, action.label)
    b.addEventListener('click', action.run)
    node.appendChild(b)
  }
}

/** Renders the people list: you first, then other browsers, then fairies. */
export function renderPeople (list: HTMLElement, awareness: Awareness, me: LocalUser): void {
  const { users, fairies } = readPeers(awareness.getStates() as Map<number, unknown>, awareness.clientID)
  const items: HTMLElement[] = []
  const person = (name: string, color: string, attrs: Record<string, string>, extra = ''): HTMLElement => {
    const li = el('li', attrs)
    const dot = el('span', { class: 'dot' })
    dot.style.background = color
    li.append(dot, el('span', { class: 'name' }, name))
    if (extra !== '') li.append(el('span', { class: 'extra' }, extra))
    return li
  }
  items.push(person(me.name, me.color, { 'data-person': 'self' }, '(you)'))
  for (const u of users) items.push(person(u.name, u.color, { 'data-person': String(u.clientId) }))
  for (const f of fairies) items.push(person(f.name, '#f9a8d4', { 'data-person': String(f.clientId), 'data-fairy-person': f.id }, `fairy · ${f.mode}`))
  list.replaceChildren(...items)
}

/** The chat panel: each fairy's chat as written to the document (prompting comes with the fairy layer). */
export function renderChat (panel: HTMLElement, doc: Y.Doc): void {
  const chats = readFairyChats(roots(doc).fairies)
  if (chats.length === 0) {
    panel.replaceChildren(el('p', { class: 'empty' }, 'No fairies in this room yet. Their chat will appear here.'))
    return
  }
  const out: HTMLElement[] = []
  for (const c of chats) {
    const section = el('div', { class: 'fairy-chat', 'data-fairy-chat': c.id })
    section.append(el('h3', {}, c.name))
    for (const item of c.chat) {
      section.append(el('p', { class: `chat-item role-${item.role.replace(/[^a-z-]/g, '') || 'unknown'}` }, `${item.from || item.role}: ${item.text}`))
    }
    out.push(section)
  }
  panel.replaceChildren(...out)
}

/** The task panel: fairy tasks and their status. */
export function renderTaskList (panel: HTMLElement, doc: Y.Doc): void {
  const tasks = readTasks(roots(doc).tasks)
  if (tasks.length === 0) {
    panel.replaceChildren(el('p', { class: 'empty' }, 'No tasks yet. Fairy projects list their tasks here.'))
    return
  }
  panel.replaceChildren(...tasks.map(t => el('li', { 'data-task': t.id, 'data-status': t.status },
    `${t.status === 'done' ? '✔' : t.status === 'in-progress' ? '…' : '○'} ${t.title}${t.assignedTo !== '' ? ` (${t.assignedTo})` : ''}`)))
}
