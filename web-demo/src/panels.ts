// The side panels and bars (DOM only): toolbar state, style panel, people list, the task panel,
// the status bar and the banner. The fairy panels are in `fairypanel.ts`.
import * as Y from 'yjs'
import type { Awareness } from 'y-protocols/awareness'
import { readPeers, type LocalUser } from '@fairyring/client'
import { groupTasks, readProjects, readTasks } from '@fairyring/client'
import { roots } from './ops.js'
import type { ConnState } from '@fairyring/client'

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
export function renderPeople (list: HTMLElement, awareness: Awareness, me: LocalUser, fairyColor: (id: string) => string | undefined = () => undefined): void {
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
  for (const f of fairies) items.push(person(f.name, fairyColor(f.id) ?? '#f9a8d4', { 'data-person': String(f.clientId), 'data-fairy-person': f.id }, `fairy · ${f.mode}`))
  list.replaceChildren(...items)
}

/** The task panel: every task (`data-task-item`), grouped by project. */
export function renderTaskList (panel: HTMLElement, doc: Y.Doc, names: ReadonlyMap<string, string> = new Map()): void {
  const projects = readProjects(doc.getMap('projects'))
  const groups = groupTasks(readTasks(roots(doc).tasks, projects), projects)
  if (groups.length === 0) {
    panel.replaceChildren(el('li', { class: 'empty' }, 'No tasks yet. Fairy projects list their tasks here.'))
    return
  }
  panel.replaceChildren(...groups.map(g => {
    const li = el('li', { class: 'task-group', 'data-task-group': g.project?.id ?? '' })
    const title = el('h4', {}, g.project !== null ? g.project.title : 'Solo tasks')
    if (g.project !== null) title.style.color = g.project.color
    const ul = el('ul')
    ul.append(...g.tasks.map(t => el('li', { 'data-task-item': t.id, 'data-status': t.status },
      `${t.status === 'done' ? '✔' : t.status === 'in-progress' ? '…' : t.status === 'aborted' ? '✕' : '○'} ${t.title}${t.assignedTo !== '' ? ` (${names.get(t.assignedTo) ?? t.assignedTo})` : ''}`)))
    li.append(title, ul)
    return li
  }))
}
