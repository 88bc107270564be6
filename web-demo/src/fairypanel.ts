// The fairy panels (DOM only): the invite control (with `data-invite-apply`: invite it in
// suggest mode; the new fairy appears at a spot of its own around this browser's view) and the
// fairies list (`data-fairy-item`, its own colour's dot, the mode, the suggest toggle
// `data-action="toggle-suggest"`, how many suggestions wait, stop and dismiss buttons), the chat
// built around one fairy: a tab per fairy (`data-chat-tab`; the selected fairy's thread shows
// unless this browser picked another tab), a sticky bar while that fairy has suggestions waiting
// (`data-review-bar`: "N suggestions waiting · Accept all · Reject all") and its thread only
// (`data-fairy-chat`, `data-chat-role`, on the first item of a request a reject button, or for a
// request that made suggestions `data-action="accept-all"` / `"reject-all"` while some wait, and
// on a request's last item what it used, `data-usage`), the chat input (`data-fairy-input`: Enter
// prompts the selected fairy with this browser's viewport and shape selection, or with two or
// more selected starts a project — never the same message to each) and its direct / suggest
// choice (`data-fairy-apply`: each fairy's toggle until the person picks one for the next
// prompt), the group prompt control (`data-action="group-prompt"`, shown when two or more
// fairies are selected: they start a project on the chat input's message, the first selected
// leads), the projects list (`data-project-item`, with `data-action="disband-project"` on live
// ones) and the selected fairies' todo list.
// It owns the fairy selection (a fairy's suggest toggle shows its entity's `apply`, the same in
// every browser, and changes it through `PATCH …/fairies/{id}`); the document is only read, all
// changes go through the fairy and review HTTP APIs (`FairyApi`, `SuggestApi`).
import type * as Y from 'yjs'
import type { Awareness } from 'y-protocols/awareness'
import { readPeers, type LocalUser } from '@fairyring/client'
import { readFairyChats, readProjects, readTasks, type FairyChat } from '@fairyring/client'
import {
  chatAuthor, chatRole, enterAction, freeSpawnPoint, isIdle, keepPresent, mergeFairies, nextSelection, requestMarks, shownThread, type FairyView
} from './fairies.js'
import { usageLabel } from './costs.js'
import { FairyApiError, groupPromptBody, promptBody, type FairyApi } from '@fairyring/client'
import { describeConflicts, SuggestApiError, type SuggestApi } from '@fairyring/client'
import {
  fairyToggle, pendingByFairy, promptApply, readApply, readFairyApply, readSuggestions, requestKey, tallies,
  tallyLabel, type ApplyMode, type RequestTally, type Suggestion
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
  private suggestions: Suggestion[] = []
  /** The chat tab this browser picked (`null`: the thread follows the selection). */
  private picked: string | null = null
  /** The fairy whose thread the chat shows. */
  shown: string | null = null
  /** Where this page asked its invited fairies to appear (by id). */
  private spawned = new Map<string, { x: number, y: number }>()

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
      const target = e.target as Element
      const tab = target.closest<HTMLElement>('[data-chat-tab]')?.dataset.chatTab
      if (tab !== undefined) { this.picked = tab; this.refresh(); return }
      const bar = target.closest<HTMLButtonElement>('[data-action="review-accept-all"], [data-action="review-reject-all"]')
      if (bar !== null && this.shown !== null) { this.decideAll(this.shown, bar); return }
      const b = target.closest<HTMLButtonElement>('[data-action="reject-request"], [data-action="reject-all"], [data-action="accept-all"]')
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
    this.picked = null
    this.refresh(true)
  }

  /**
   * The review bar's *Accept all* / *Reject all*: every suggestion of `fairy` that waits, request
   * by request (`POST …/requests/{rid}/accept`, or the request's revert), one by one for records
   * without a request.
   */
  private decideAll (fairy: string, b: HTMLButtonElement): void {
    const accept = b.dataset.action === 'review-accept-all'
    const waiting = this.suggestions.filter(x => x.fairyId === fairy && x.status === 'pending')
    const requests = [...new Set(waiting.filter(x => x.requestId !== '').map(x => x.requestId))]
    const loose = waiting.filter(x => x.requestId === '').map(x => x.id)
    if (requests.length === 0 && loose.length === 0) return
    b.disabled = true
    this.run(async () => {
      try {
        const conflicts: string[] = []
        for (const r of requests) {
          if (accept) {
            const why = describeConflicts((await this.d.suggestApi.acceptRequest(fairy, r)).conflicts)
            if (why !== null) conflicts.push(why)
          } else {
            await this.d.api.revert(fairy, r)
          }
        }
        for (const id of loose) await this.d.suggestApi.decide(id, accept ? 'accept' : 'reject')
        if (conflicts.length > 0) throw new SuggestApiError(409, 'conflicts', conflicts.join(' '))
      } finally {
        b.disabled = false
      }
    })
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
      // A project's colour while it lives, else the fairy's own.
      colors: new Map(this.views.map(v => [v.id, v.color ?? v.own])),
      selected: new Set(this.selected),
      names,
      own: new Map(this.views.map(v => [v.id, v.own]))
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
    // A spot of its own around this browser's view: fairies invited one after another do not
    // land on one another.
    const { fairies } = readPeers(this.d.awareness.getStates() as Map<number, unknown>, this.d.awareness.clientID)
    const here = new Set(fairies.map(f => f.id))
    // Where they are now, and where this page asked for the ones whose presence is not here yet.
    const taken = [...fairies, ...[...this.spawned].filter(([id]) => !here.has(id)).map(([, p]) => p)]
    const at = freeSpawnPoint(this.d.viewport(), taken)
    this.d.api.invite(n.nameInput.value, n.inviteApply.checked ? 'suggest' : 'direct', at).then(id => {
      this.spawned.set(id, at)
      this.showError(null)
      n.nameInput.value = ''
      this.invited = id
      this.refresh(true)
    }).catch(e => this.showError(e instanceof FairyApiError ? e.message : String(e)))
      .finally(() => { n.invite.disabled = false })
  }

  /**
   * Enter in the chat input: prompts the selected fairy (or the only one in the room); with two
   * or more selected it starts a project instead — one request, never the same message sent to
   * each (that gave identical drawings stacked on each other).
   */
  private send (): void {
    const input = this.d.nodes.input
    const body = promptBody(input.value, this.d.viewport(), this.d.shapeSelection())
    if (body === null) return
    const action = enterAction(this.selected, this.views.map(v => v.id))
    if (action.kind === 'none') { this.showError(action.why); return }
    if (action.kind === 'project') { this.sendGroup(); return }
    const to = action.to
    input.value = ''
    const choice = this.choice
    this.choice = null
    this.renderApplyChoice()
    this.d.api.prompt(to, { ...body, apply: promptApply(choice, this.toggle(to)) }).then(() => this.showError(null)).catch(e => {
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
    this.suggestions = suggestions
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
    n.input.placeholder = names.length > 1
      ? `What should ${names.join(', ')} make together? (Enter starts a project)`
      : names.length > 0
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
    const key = JSON.stringify([this.views.map(v => [v.id, v.name, v.mode, v.pose, v.color, v.own, v.present, extra(v.id)]), this.selected])
    if (key === this.keys.list) return
    this.keys.list = key
    const items = this.views.map(v => {
      const selected = this.selected.includes(v.id)
      const li = el('li', { 'data-fairy-item': v.id, 'data-mode': v.mode, 'data-pose': v.pose, 'data-fairy-color': v.own, 'aria-selected': String(selected), title: 'Click to select, Shift+click to add' })
      const dot = el('span', { class: 'dot' })
      // Its own colour; ringed in its project's while it is in one.
      dot.style.background = v.own
      if (v.color !== null) dot.style.boxShadow = `0 0 0 2px ${v.color}`
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
    if (this.picked !== null && !this.chats.some(c => c.id === this.picked)) this.picked = null
    const shownId = shownThread(this.chats, this.selected, this.picked)
    this.shown = shownId
    const own = new Map(this.views.map(v => [v.id, v.own]))
    const waiting = (id: string): number => this.pending.get(id)?.length ?? 0
    const c = this.chats.find(x => x.id === shownId)
    const tabsKey = this.chats.map(x => [x.id, x.name, own.get(x.id), waiting(x.id), x.chat.length])
    const key = JSON.stringify([c ?? null, tabsKey, [...people], shownId, this.selected, c !== undefined ? [...this.tallies].filter(([k]) => k.startsWith(`${c.id}\n`)) : []])
    if (key === this.keys.chat) return
    this.keys.chat = key
    const panel = this.d.nodes.chat
    if (c === undefined) {
      panel.replaceChildren(el('p', { class: 'empty' }, 'No fairies in this room yet. Invite one, select it and tell it what to draw.'))
      return
    }
    const follow = panel.dataset.shown !== c.id || panel.scrollTop + panel.clientHeight >= panel.scrollHeight - 24
    panel.dataset.shown = c.id
    const head = el('div', { class: 'chat-head' })
    // One tab per fairy: its own colour, its name, how many suggestions wait for review.
    const tabs = el('div', { class: 'chat-tabs', role: 'tablist', 'aria-label': 'whose chat to show' })
    for (const x of this.chats) {
      const tab = el('button', {
        type: 'button', role: 'tab', 'data-chat-tab': x.id, 'aria-selected': String(x.id === c.id),
        title: this.selected.includes(x.id) ? `${x.name} (selected)` : `Show ${x.name}'s chat`
      })
      const dot = el('span', { class: 'dot' })
      dot.style.background = own.get(x.id) ?? '#db2777'
      tab.append(dot, document.createTextNode(x.name))
      const n = waiting(x.id)
      if (n > 0) tab.append(el('span', { class: 'waiting', 'data-pending': String(n) }, String(n)))
      tabs.append(tab)
    }
    head.append(tabs)
    const n = waiting(c.id)
    if (n > 0) {
      // Review mode: what waits for this fairy, decided in one click, always in view.
      const bar = el('div', { class: 'review-bar', 'data-review-bar': c.id, 'data-pending': String(n) })
      bar.append(
        el('span', {}, `${n} suggestion${n === 1 ? '' : 's'} waiting`), document.createTextNode(' · '),
        el('button', { type: 'button', 'data-action': 'review-accept-all', title: `Make every change ${c.name} suggests` }, 'Accept all'),
        document.createTextNode(' · '),
        el('button', { type: 'button', 'data-action': 'review-reject-all', title: `Drop every change ${c.name} suggests` }, 'Reject all'))
      head.append(bar)
    }
    const color = own.get(c.id) ?? '#db2777'
    const section = el('div', { class: this.selected.includes(c.id) ? 'fairy-chat selected' : 'fairy-chat', 'data-fairy-chat': c.id, role: 'tabpanel' })
    if (c.chat.length === 0) section.append(el('p', { class: 'empty' }, 'Nothing said yet.'))
    const marks = requestMarks(c.chat)
    c.chat.forEach((item, i) => {
      const role = chatRole(item.role, item.from)
      const rejected = item.requestId !== null && marks.rejected.has(item.requestId)
      const attrs: Record<string, string> = { class: `chat-item role-${role}`, 'data-chat-role': role }
      if (item.requestId !== null) attrs['data-request'] = item.requestId
      if (rejected) attrs['data-rejected'] = 'true'
      const p = el('p', attrs)
      const who = el('b', {}, `${chatAuthor(item.from, item.role, this.d.user.id, people, c.name)}: `)
      if (role === 'fairy') who.style.color = color
      p.append(who, document.createTextNode(item.text))
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
      if (item.usage !== undefined) {
        // What the request's model calls used (the server writes it on the request's last item).
        const u = item.usage
        const usage = el('span', {
          class: 'usage', 'data-usage': String(u.inputTokens + u.outputTokens + u.cacheCreationInputTokens),
          title: 'What this request\'s model calls used: input, output and cached tokens, and the cost when the model has a price'
        }, usageLabel(u))
        if (u.costUsd !== undefined) usage.dataset.usd = String(u.costUsd)
        p.append(usage)
      }
      section.append(p)
    })
    panel.replaceChildren(head, section)
    // Follows new items unless the person scrolled up to read.
    if (follow) panel.scrollTop = panel.scrollHeight
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
