// The fairy panels (DOM only): the invite control (with `data-invite-apply`: invite it in
// suggest mode) and the fairies list (`data-fairy-item`, with the mode, the suggest toggle
// `data-action="toggle-suggest"`, how many suggestions wait, stop and dismiss buttons), each
// fairy's chat (`data-chat-role`, on the first item of a request a reject button, or for a
// request that made suggestions `data-action="accept-all"` / `"reject-all"` while some wait), the
// chat input (`data-fairy-input`: Enter prompts the selected fairies with this browser's viewport
// and shape selection) and its direct / suggest choice (`data-fairy-apply`: each fairy's toggle
// until the person picks one for the next prompt), the group prompt control
// (`data-action="group-prompt"`, shown when two or more fairies are selected: they start a project
// on the chat input's message, the first selected leads), the projects list (`data-project-item`,
// with `data-action="disband-project"` on live ones) and the selected fairies' todo list.
// It owns the fairy selection (a fairy's suggest toggle shows its entity's `apply`, the same in
// every browser, and changes it through `PATCH …/fairies/{id}`); the document is only read, all
// changes go through the fairy and review HTTP APIs (`FairyApi`, `SuggestApi`).
import type * as Y from 'yjs'
import type { Awareness } from 'y-protocols/awareness'
import { readPeers, type LocalUser } from '@fairyring/client'
import { readFairyChats, readProjects, readTasks, type FairyChat } from '@fairyring/client'
import { chatAuthor, chatRole, isIdle, keepPresent, mergeFairies, nextSelection, requestMarks, type FairyView } from './fairies.js'
import { FairyApiError, groupPromptBody, promptBody, type FairyApi } from '@fairyring/client'
import { describeConflicts, SuggestApiError, type SuggestApi } from '@fairyring/client'
import {
  fairyToggle, pendingByFairy, promptApply, readApply, readFairyApply, readSuggestions, requestKey, tallies,
  tallyLabel, type ApplyMode, type RequestTally
} from '@fairyring/client'
import { groupPromptLabel, projectRows } from './projects.js'
import type { FairyLook } from './canvas.js'
import type { Box } from './geometry.js'

/** What the panel needs from the page. */
export interface FairyPanelDeps {
  doc: Y.Doc
  awareness: Awareness
  user: LocalUser
  api: FairyApi
  suggestApi: SuggestApi
  /** The room (this browser remembers each fairy's suggest toggle per room). */
  room: string
  /** The page area this browser shows, and its selected shapes (sent with a prompt). */
  viewport: () => Box
  shapeSelection: () => string[]
  /** Called when the fairy selection or the fairies' looks change (the canvas redraws). */
  onChange: () => void
  nodes: {
    list: HTMLElement, chat: HTMLElement, input: HTMLInputElement, nameInput: HTMLInputElement, invite: HTMLButtonElement, error: HTMLElement,
    todo: HTMLElement, todoTitle: HTMLElement, group: HTMLButtonElement, projects: HTMLElement, apply: HTMLSelectElement, inviteApply: HTMLInputElement
  }
}

function el<K extends keyof HTMLElementTagNameMap> (tag: K, attrs: Record<string, string> = {}, text?: string): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag)
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v)
  if (text !== undefined) e.textContent = text
  return e
}

export class FairyPanel {
  /** The selected fairies (ids, in click order). */
  selected: string[] = []
  private invited: string | null = null
  private views: FairyView[] = []
  private chats: FairyChat[] = []
  private keys = { list: '', chat: '', todo: '', projects: '' }
  /** Each fairy's default apply mode (its entity's `apply`) and this browser's toggles. */
  private entityApply = new Map<string, ApplyMode>()
  private toggles = new Map<string, ApplyMode>()
  /** The direct / suggest choice the person made for the next prompt (`null`: each fairy's toggle). */
  private choice: ApplyMode | null = null
  private choiceFor = ''
  private tallies = new Map<string, RequestTally>()
  private pending = new Map<string, string[]>()

  constructor (private readonly d: FairyPanelDeps) {
    const n = d.nodes
    n.invite.addEventListener('click', () => this.invite())
    n.nameInput.addEventListener('keydown', e => {
      if (e.key === 'Enter') { e.preventDefault(); this.invite() }
    })
    n.input.addEventListener('keydown', e => {
      if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) { e.preventDefault(); this.send() }
    })
    n.group.addEventListener('click', () => this.sendGroup())
    n.apply.addEventListener('change', () => {
      this.choice = readApply(n.apply.value)
      n.apply.dataset.chosen = 'true'
    })
    n.projects.addEventListener('click', e => {
      const b = (e.target as Element).closest<HTMLButtonElement>('[data-action="disband-project"]')
      const id = b?.closest<HTMLElement>('[data-project-item]')?.dataset.projectItem
      if (b == null || id === undefined) return
      b.disabled = true
      this.run(() => d.api.disband(id).catch(err => { b.disabled = false; throw err }))
    })
    n.list.addEventListener('click', e => {
      const target = e.target as Element
      const item = target.closest<HTMLElement>('[data-fairy-item]')
      const id = item?.dataset.fairyItem
      if (id === undefined) return
      const action = target.closest<HTMLElement>('[data-action]')?.dataset.action
      if (action === 'cancel-fairy') this.run(() => d.api.cancel(id))
      else if (action === 'dismiss-fairy') this.run(() => d.api.dismiss(id))
      else if (action === 'toggle-suggest') this.toggleSuggest(id)
      else this.click(id, e.shiftKey)
    })
    n.chat.addEventListener('click', e => {
      const b = (e.target as Element).closest<HTMLButtonElement>('[data-action="reject-request"], [data-action="reject-all"], [data-action="accept-all"]')
      const item = b?.closest<HTMLElement>('[data-request]')
      const fairy = b?.closest<HTMLElement>('[data-fairy-chat]')?.dataset.fairyChat
      const request = item?.dataset.request
      if (b == null || fairy === undefined || request === undefined) return
      b.disabled = true
      if (b.dataset.action === 'accept-all') {
        // Conflicts (a shape deleted or made meanwhile) are not a failure of the call: say which.
        this.run(() => d.suggestApi.acceptRequest(fairy, request).then(r => {
          const why = describeConflicts(r.conflicts)
          if (why !== null) throw new SuggestApiError(409, 'conflicts', why)
        }).catch(err => { b.disabled = false; throw err }))
      } else {
        // *Reject all* is the request's revert: on a suggest-mode request it rejects what waits.
        this.run(() => d.api.revert(fairy, request).catch(err => { b.disabled = false; throw err }))
      }
    })
  }

  /** A click on a fairy (its sprite or its list entry); Shift adds it to the selection. */
  click (id: string, additive: boolean): void {
    this.selected = nextSelection(this.selected, id, additive)
    this.refresh(true)
  }

  /** Hats, colours, selection and names for the canvas. */
  look (): FairyLook {
    const names = new Map<string, string>()
    const { users } = readPeers(this.d.awareness.getStates() as Map<number, unknown>, this.d.awareness.clientID)
    for (const u of users) names.set(u.id, u.name)
    names.set(this.d.user.id, this.d.user.name)
    for (const v of this.views) names.set(v.id, v.name)
    return {
      hats: new Map(this.views.map(v => [v.id, v.hat])),
      colors: new Map(this.views.map(v => [v.id, v.color])),
      selected: new Set(this.selected),
      names
    }
  }

  private showError (message: string | null): void {
    const e = this.d.nodes.error
    e.hidden = message === null
    e.textContent = message ?? ''
  }

  private run (call: () => Promise<unknown>): void {
    call().then(() => this.showError(null)).catch(e => this.showError(e instanceof FairyApiError || e instanceof SuggestApiError ? e.message : String(e)))
  }

  /** A fairy's suggest toggle: its entity's default (the same in every browser), or the value
   * this browser just asked the server for until the entity shows it. */
  toggle (id: string): ApplyMode {
    return fairyToggle(this.toggles.get(id), this.entityApply.get(id))
  }

  /** Asks the server to change the fairy's default (`PATCH …/fairies/{id}`); every browser's
   * toggle follows its entity. */
  private toggleSuggest (id: string): void {
    const next: ApplyMode = this.toggle(id) === 'suggest' ? 'direct' : 'suggest'
    this.toggles.set(id, next)
    this.refresh()
    this.run(async () => {
      try {
        await this.d.api.setApply(id, next)
      } catch (e) {
        this.toggles.delete(id)
        this.refresh()
        throw e
      }
    })
  }

  /** Who the chat input talks to: the selected fairies, or the only one in the room. */
  private targets (): string[] {
    const present = this.views.map(v => v.id)
    return this.selected.length > 0 ? this.selected : present.length === 1 ? present : []
  }

  /** The direct / suggest choice shows the first target's toggle until the person picks one. */
  private renderApplyChoice (): void {
    const n = this.d.nodes
    const targets = this.targets()
    const key = targets.join(' ')
    if (key !== this.choiceFor) { this.choiceFor = key; this.choice = null }
    const first = targets[0]
    const value = this.choice ?? (first !== undefined ? this.toggle(first) : 'direct')
    if (n.apply.value !== value) n.apply.value = value
    if (this.choice === null) delete n.apply.dataset.chosen
    n.apply.disabled = targets.length === 0
    n.apply.title = this.choice !== null
      ? 'Chosen for the next prompt: direct draws at once, suggest proposes changes for review'
      : 'Each fairy\'s suggest toggle; change it for the next prompt only'
  }

  private invite (): void {
    const n = this.d.nodes
    n.invite.disabled = true
    this.d.api.invite(n.nameInput.value, n.inviteApply.checked ? 'suggest' : 'direct').then(id => {
      this.showError(null)
      n.nameInput.value = ''
      this.invited = id
      this.refresh(true)
    }).catch(e => this.showError(e instanceof FairyApiError ? e.message : String(e)))
      .finally(() => { n.invite.disabled = false })
  }

  /** Sends the chat input to the selected fairies (or the only one in the room). */
  private send (): void {
    const input = this.d.nodes.input
    const body = promptBody(input.value, this.d.viewport(), this.d.shapeSelection())
    if (body === null) return
    const to = this.targets()
    if (to.length === 0) {
      this.showError(this.views.length === 0 ? 'Invite a fairy first, then talk to it here.' : 'Select a fairy (click it) to talk to it.')
      return
    }
    input.value = ''
    const choice = this.choice
    this.choice = null
    this.renderApplyChoice()
    Promise.all(to.map(id => this.d.api.prompt(id, { ...body, apply: promptApply(choice, this.toggle(id)) }))).then(() => this.showError(null)).catch(e => {
      if (input.value === '') input.value = body.message
      this.showError(e instanceof FairyApiError ? e.message : String(e))
    })
  }

  /**
   * Starts a project: the selected fairies (the first selected leads) work together on the chat
   * input's message, in this browser's viewport, with its selected shapes.
   */
  private sendGroup (): void {
    const { input, group } = this.d.nodes
    const body = groupPromptBody(input.value, this.selected, this.d.viewport(), this.d.shapeSelection())
    if ('refused' in body) { this.showError(body.refused); return }
    // The leader's toggle, unless the person chose for this prompt.
    body.apply = promptApply(this.choice, this.toggle(body.orchestratorId ?? this.selected[0] ?? ''))
    this.choice = null
    group.disabled = true
    input.value = ''
    this.d.api.groupPrompt(body).then(() => this.showError(null)).catch(e => {
      if (input.value === '') input.value = body.message
      this.showError(e instanceof FairyApiError ? e.message : String(e))
    }).finally(() => { group.disabled = false })
  }

  /** Re-reads the document and awareness and redraws what changed. */
  refresh (force = false): void {
    const { fairies: peers } = readPeers(this.d.awareness.getStates() as Map<number, unknown>, this.d.awareness.clientID)
    this.chats = readFairyChats(this.d.doc.getMap('fairies'))
    this.entityApply = readFairyApply(this.d.doc.getMap('fairies'))
    // A toggle asked for is shown until the entity says it.
    for (const [id, asked] of [...this.toggles]) if (this.entityApply.get(id) === asked) this.toggles.delete(id)
    const suggestions = readSuggestions(this.d.doc.getMap('suggestions'))
    this.tallies = tallies(suggestions)
    this.pending = pendingByFairy(suggestions)
    this.views = mergeFairies(this.chats, peers, readProjects(this.d.doc.getMap('projects')))
    const ids = new Set(this.views.map(v => v.id))
    if (this.invited !== null && ids.has(this.invited)) { this.selected = [this.invited]; this.invited = null }
    const before = this.selected
    this.selected = keepPresent(this.selected, ids)
    this.renderList()
    this.renderChat()
    this.renderTodo()
    this.renderProjects()
    this.renderApplyChoice()
    const n = this.d.nodes
    // In selection order: the first selected leads a group prompt.
    const names = this.selected.flatMap(id => this.views.filter(v => v.id === id).map(v => v.name))
    n.input.placeholder = names.length > 0
      ? `Talk to ${names.join(' and ')} (Enter)`
      : this.views.length === 1 ? `Talk to ${this.views[0]?.name ?? 'the fairy'} (Enter)` : this.views.length === 0 ? 'Invite a fairy to talk to it' : 'Select a fairy to talk to it'
    const label = groupPromptLabel(names)
    n.group.hidden = label === null
    n.group.textContent = label ?? ''
    if (force || before !== this.selected) this.d.onChange()
  }

  /** The projects list: each project's title, status, members and progress; live ones can be disbanded. */
  renderProjects (): void {
    const projects = readProjects(this.d.doc.getMap('projects'))
    const rows = projectRows(projects, readTasks(this.d.doc.getMap('tasks'), projects), this.look().names)
    const key = JSON.stringify(rows)
    if (key === this.keys.projects) return
    this.keys.projects = key
    const items = rows.map(r => {
      const li = el('li', { 'data-project-item': r.id, 'data-status': r.status })
      const head = el('div', { class: 'project-head' })
      const dot = el('span', { class: 'dot' })
      dot.style.background = r.color
      head.append(dot, el('span', { class: 'title' }, r.title), el('span', { class: 'status', 'data-project-status': r.status }, r.status))
      if (r.live) head.append(el('button', { type: 'button', 'data-action': 'disband-project', title: 'Stop the project: every member stops at once' }, 'Disband'))
      li.append(head, el('div', { class: 'members' }, r.members.join(', ')))
      if (r.progress !== '') li.append(el('div', { class: 'progress' }, r.progress))
      return li
    })
    if (items.length === 0) items.push(el('li', { class: 'empty' }, 'No projects yet: select two or more fairies (Shift+click), type what to make and start a project.'))
    this.d.nodes.projects.replaceChildren(...items)
  }

  private renderList (): void {
    const extra = (id: string): [ApplyMode, number] => [this.toggle(id), this.pending.get(id)?.length ?? 0]
    const key = JSON.stringify([this.views.map(v => [v.id, v.name, v.mode, v.pose, v.color, v.present, extra(v.id)]), this.selected])
    if (key === this.keys.list) return
    this.keys.list = key
    const items = this.views.map(v => {
      const selected = this.selected.includes(v.id)
      const li = el('li', { 'data-fairy-item': v.id, 'data-mode': v.mode, 'data-pose': v.pose, 'aria-selected': String(selected), title: 'Click to select, Shift+click to add' })
      const dot = el('span', { class: 'dot' })
      dot.style.background = v.color ?? '#f9a8d4'
      li.append(dot, el('span', { class: 'name' }, v.name), el('span', { class: 'mode', 'data-fairy-mode': v.mode }, v.present ? v.mode : 'arriving…'))
      const [apply, waiting] = extra(v.id)
      if (waiting > 0) li.append(el('span', { class: 'waiting', 'data-pending': String(waiting), title: `${waiting} suggestion${waiting === 1 ? '' : 's'} waiting for review` }, String(waiting)))
      li.append(el('button', {
        type: 'button', 'data-action': 'toggle-suggest', 'aria-pressed': String(apply === 'suggest'), 'data-apply': apply,
        title: apply === 'suggest'
          ? 'Suggest mode: its changes wait for your review (click for direct). Remembered in this browser.'
          : 'Direct mode: it draws at once (click to review its changes first). Remembered in this browser.'
      }, 'Suggest'))
      if (!isIdle(v.mode, v.pose)) li.append(el('button', { type: 'button', 'data-action': 'cancel-fairy', title: 'Stop what it is doing' }, 'Stop'))
      li.append(el('button', { type: 'button', 'data-action': 'dismiss-fairy', title: 'Send it away' }, 'Dismiss'))
      return li
    })
    if (items.length === 0) items.push(el('li', { class: 'empty' }, 'No fairies yet: invite one.'))
    this.d.nodes.list.replaceChildren(...items)
  }

  private renderChat (): void {
    const people = new Map<string, string>()
    const { users } = readPeers(this.d.awareness.getStates() as Map<number, unknown>, this.d.awareness.clientID)
    for (const u of users) people.set(u.id, u.name)
    const order = [...this.chats].sort((a, b) => Number(this.selected.includes(b.id)) - Number(this.selected.includes(a.id)))
    const key = JSON.stringify([order, [...people], this.selected, [...this.tallies]])
    if (key === this.keys.chat) return
    this.keys.chat = key
    const panel = this.d.nodes.chat
    if (order.length === 0) {
      panel.replaceChildren(el('p', { class: 'empty' }, 'No fairies in this room yet. Invite one, select it and tell it what to draw.'))
      return
    }
    panel.replaceChildren(...order.map(c => {
      const section = el('div', { class: this.selected.includes(c.id) ? 'fairy-chat selected' : 'fairy-chat', 'data-fairy-chat': c.id })
      section.append(el('h3', {}, c.name))
      if (c.chat.length === 0) section.append(el('p', { class: 'empty' }, 'Nothing said yet.'))
      const marks = requestMarks(c.chat)
      c.chat.forEach((item, i) => {
        const role = chatRole(item.role, item.from)
        const rejected = item.requestId !== null && marks.rejected.has(item.requestId)
        const attrs: Record<string, string> = { class: `chat-item role-${role}`, 'data-chat-role': role }
        if (item.requestId !== null) attrs['data-request'] = item.requestId
        if (rejected) attrs['data-rejected'] = 'true'
        const p = el('p', attrs)
        p.append(el('b', {}, `${chatAuthor(item.from, item.role, this.d.user.id, people, c.name)}: `), document.createTextNode(item.text))
        const review = item.requestId !== null ? this.tallies.get(requestKey(c.id, item.requestId)) : undefined
        if (marks.heads.has(i) && review !== undefined) {
          // A suggest-mode request: decide on what waits, or say how it was decided.
          p.append(el('span', { class: 'review', 'data-review': review.pending.length > 0 ? 'pending' : 'decided' }, ` (${tallyLabel(review)})`))
          if (review.pending.length > 0) {
            p.append(
              el('button', { type: 'button', 'data-action': 'accept-all', title: 'Make every change this request suggests' }, `Accept all ${review.pending.length}`),
              el('button', { type: 'button', 'data-action': 'reject-all', title: 'Drop every change this request suggests' }, 'Reject all'))
          }
        } else if (marks.heads.has(i)) {
          if (rejected) p.append(el('span', { class: 'rejected' }, ' (rejected)'))
          else p.append(el('button', { type: 'button', 'data-action': 'reject-request', title: 'Take back what the fairy did for this request' }, 'Reject'))
        }
        section.append(p)
      })
      return section
    }))
    panel.scrollTop = panel.scrollHeight
  }

  private renderTodo (): void {
    const shown = this.views.filter(v => this.selected.includes(v.id))
    const key = JSON.stringify(shown.map(v => [v.id, v.name, v.todo]))
    if (key === this.keys.todo) return
    this.keys.todo = key
    const n = this.d.nodes
    n.todoTitle.textContent = shown.length > 0 ? `Todo · ${shown.map(v => v.name).join(', ')}` : 'Todo'
    const items: HTMLElement[] = []
    for (const v of shown) {
      for (const t of v.todo) {
        const mark = t.status === 'done' ? '✔' : t.status === 'in-progress' ? '…' : '○'
        items.push(el('li', { 'data-todo-item': t.id, 'data-todo-fairy': v.id, 'data-status': t.status }, `${mark} ${t.text}`))
      }
    }
    if (items.length === 0) items.push(el('li', { class: 'empty' }, shown.length === 0 ? 'Select a fairy to see its todo list.' : 'Its todo list is empty.'))
    n.todo.replaceChildren(...items)
  }
}
