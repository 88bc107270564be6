// Entry point: reads the URL, gets a token, opens the room with @fairyring/client's
// `RoomConnection` (official yjs + y-websocket; the dev token renewed before it expires),
// publishes presence, and wires the canvas and the panels together.
import {
  RoomConnection, fetchDevToken, TokenError, colorForId, COLOR_NAMES, FILL_NAMES, swatch, describeClose, describeRefusal,
  describeStalled, FairyApi, FairyringApi, SuggestApi, SuggestApiError, HistoryApi, readPeers, type DevToken, type TokenSource
} from '@fairyring/client'
import { CostBar, tokenMayUseFairies } from './costs.js'
import { cleanName, parseParams } from './params.js'
import { Canvas } from './canvas.js'
import { TOOLS } from './tools.js'
import { renderPeople, renderTaskList, setBanner, setStatus } from './panels.js'
import { FairyPanel } from './fairypanel.js'
import { HistoryPanel } from './historypanel.js'
import { roots } from './ops.js'

function byId<T extends HTMLElement | SVGSVGElement> (id: string): T {
  const e = document.getElementById(id)
  if (e === null) throw new Error(`page is missing #${id}`)
  return e as T
}

function byQuery<T extends Element> (selector: string): T {
  const e = document.querySelector<T>(selector)
  if (e === null) throw new Error(`page is missing ${selector}`)
  return e
}

function randomId (): string {
  return Math.floor(Math.random() * 36 ** 6).toString(36).padStart(6, '0')
}

function storedGuestId (): string {
  try {
    const existing = localStorage.getItem('fairyring.guest')
    if (existing !== null && /^[a-z0-9-]{1,40}$/.test(existing)) return existing
    const id = `guest-${randomId()}`
    localStorage.setItem('fairyring.guest', id)
    return id
  } catch {
    return `guest-${randomId()}`
  }
}

function askName (fromUrl: string | null): string {
  if (fromUrl !== null) return fromUrl
  let saved: string | null = null
  try { saved = cleanName(localStorage.getItem('fairyring.name')) } catch { /* storage disabled */ }
  const answer = cleanName(window.prompt('Your name on the canvas?', saved ?? '')) ?? saved ?? `guest ${randomId().slice(0, 3)}`
  try { localStorage.setItem('fairyring.name', answer) } catch { /* storage disabled */ }
  return answer
}

async function start (): Promise<void> {
  const params = parseParams(location.search)
  const status = byId<HTMLElement>('status')
  const banner = byId<HTMLElement>('banner')
  byId<HTMLElement>('room-name').textContent = params.room
  document.title = `${params.room} · fairyring`
  setStatus(status, 'connecting')
  if (params.roomWasInvalid) setBanner(banner, `That room name is not valid (1–128 of A–Z a–z 0–9 . _ -): opened "${params.room}" instead.`)

  const name = askName(params.name)
  const urlToken = new URLSearchParams(location.search).get('token')
  let dev: DevToken | null = null
  let devMode = false
  if (urlToken === null) {
    try {
      dev = await fetchDevToken(name)
      devMode = dev !== null
    } catch (e) {
      setBanner(banner, e instanceof TokenError ? e.message : String(e))
    }
  }
  const sub = dev?.sub ?? storedGuestId()
  const user = { id: sub, name, color: colorForId(sub) }

  // In dev mode the connection asks for a new dev token before the old one expires (and after a
  // 4401); a token from the URL is used as it is.
  const tokenSource: TokenSource | undefined = urlToken !== null
    ? () => urlToken
    : devMode
      ? async () => {
        const t = dev !== null ? dev : await fetchDevToken(name)
        dev = null
        return t !== null ? { token: t.token, expiresAt: t.expiresAt } : null
      }
      : undefined
  const conn = new RoomConnection({ server: location.origin, room: params.room, ...(tokenSource !== undefined ? { token: tokenSource } : {}) })
  const { doc, provider, awareness } = conn
  awareness.setLocalState({ user, cursor: null, selection: [], viewport: { x: 0, y: 0, w: 0, h: 0 } })

  // ---- connection status and refusals ----
  let refused = false
  let failures = 0
  const recover = (): void => {
    refused = false
    setBanner(banner, null)
    conn.connect().catch(e => setBanner(banner, `Could not get a new token: ${String(e)}`, { label: 'Try again', run: recover }))
  }
  const refuse = (message: string): void => {
    refused = true
    conn.disconnect()
    setStatus(status, 'refused')
    setBanner(banner, message, { label: devMode ? 'Get a new token and reconnect' : 'Try again', run: recover })
  }
  conn.on('status', s => {
    if (refused) return
    if (s === 'connected') {
      failures = 0
      setStatus(status, 'connected')
    } else if (s === 'connecting') {
      setStatus(status, failures > 0 ? 'offline' : 'connecting', describeStalled(failures) ?? '')
    } else {
      setStatus(status, 'offline')
    }
  })
  conn.on('connect-failed', n => {
    failures = n
    if (refused) return
    const stalled = describeStalled(failures)
    if (stalled !== null) setStatus(status, 'offline', stalled)
  })
  conn.on('refused', r => {
    const message = describeRefusal(r.status, { error: r.error, detail: r.detail })
    if (message !== null) refuse(message)
  })
  conn.on('error', e => setBanner(banner, `Could not get a new token: ${e.message}`, { label: 'Try again', run: recover }))
  // 4401 renews the token by itself; the codes that do not reconnect are said in words.
  for (const event of ['policy-violation', 'too-large'] as const) {
    conn.on(event, ({ code, reason }) => refuse(describeClose(code, reason) ?? `The server closed the connection (${code}${reason !== '' ? `: ${reason}` : ''}).`))
  }
  conn.on('close', ({ code, reason }) => {
    if (code >= 4400 && code < 4500 && code !== 4401) refuse(describeClose(code, reason) ?? `The server closed the connection (${code}).`)
  })
  conn.on('permission-denied', reason => refuse(`Permission denied: ${reason}`))

  // ---- canvas, toolbar, panels ----
  const toolbar = byId<HTMLElement>('tools')
  for (const t of TOOLS) {
    const b = document.createElement('button')
    b.type = 'button'
    b.dataset.tool = t.name
    b.title = t.key !== '' ? `${t.label} (${t.key.toUpperCase()})` : t.label
    b.textContent = t.label.split(' ')[0] ?? t.name
    toolbar.appendChild(b)
  }
  const colors = byId<HTMLElement>('colors')
  for (const c of COLOR_NAMES) {
    const b = document.createElement('button')
    b.type = 'button'
    b.dataset.color = c
    b.title = c
    b.style.background = swatch(c).solid
    colors.appendChild(b)
  }
  const fills = byId<HTMLElement>('fills')
  for (const f of FILL_NAMES) {
    const b = document.createElement('button')
    b.type = 'button'
    b.dataset.fill = f
    b.textContent = f
    fills.appendChild(b)
  }
  const people = byId<HTMLElement>('people')
  const undoBtn = document.querySelector<HTMLButtonElement>('[data-action="undo"]')
  const redoBtn = document.querySelector<HTMLButtonElement>('[data-action="redo"]')
  let canvas: Canvas | null = null
  let fairyPanel: FairyPanel | null = null
  let history: HistoryPanel | null = null
  const refreshUi = (): void => {
    if (canvas === null) return
    for (const b of toolbar.querySelectorAll<HTMLElement>('[data-tool]')) b.setAttribute('aria-pressed', String(b.dataset.tool === canvas.tool))
    for (const b of colors.querySelectorAll<HTMLElement>('[data-color]')) b.setAttribute('aria-pressed', String(b.dataset.color === canvas.style.color))
    for (const b of fills.querySelectorAll<HTMLElement>('[data-fill]')) b.setAttribute('aria-pressed', String(b.dataset.fill === canvas.style.fill))
    if (undoBtn !== null) undoBtn.disabled = !canvas.undo.canUndo()
    if (redoBtn !== null) redoBtn.disabled = !canvas.undo.canRedo()
  }
  const toastNode = byId<HTMLElement>('toast')
  let toastTimer: ReturnType<typeof setTimeout> | undefined
  const toast = (msg: string): void => {
    toastNode.textContent = msg
    toastNode.hidden = false
    clearTimeout(toastTimer)
    toastTimer = setTimeout(() => { toastNode.hidden = true }, 3000)
  }
  const currentToken = (): string | null => conn.token ?? urlToken
  const suggestApi = new SuggestApi(params.room, currentToken)
  canvas = new Canvas({
    doc,
    awareness,
    user,
    svg: byId<SVGSVGElement>('canvas'),
    textEditor: byId<HTMLTextAreaElement>('text-editor'),
    onUiChange: refreshUi,
    toast,
    fairyLook: () => fairyPanel?.look() ?? { hats: new Map(), colors: new Map(), selected: new Set(), names: new Map() },
    onFairyClick: (id, additive) => fairyPanel?.click(id, additive),
    onRender: () => history?.syncCamera(),
    onDecide: (id, decision) => suggestApi.decide(id, decision).then(() => undefined, e => toast(e instanceof SuggestApiError ? e.message : String(e)))
  })
  const c = canvas
  c.undo.on('stack-item-added', refreshUi)
  c.undo.on('stack-item-popped', refreshUi)
  toolbar.addEventListener('click', e => {
    const t = (e.target as Element).closest<HTMLElement>('[data-tool]')?.dataset.tool
    if (t !== undefined) c.setTool(t)
  })
  colors.addEventListener('click', e => {
    const v = (e.target as Element).closest<HTMLElement>('[data-color]')?.dataset.color
    if (v !== undefined) c.applyStyle('color', v)
  })
  fills.addEventListener('click', e => {
    const v = (e.target as Element).closest<HTMLElement>('[data-fill]')?.dataset.fill
    if (v !== undefined) c.applyStyle('fill', v)
  })
  const actions: Record<string, () => void> = {
    undo: () => c.undoOwn(),
    redo: () => c.redoOwn(),
    delete: () => c.deleteSelection(),
    front: () => c.reorderSelection('front'),
    back: () => c.reorderSelection('back'),
    'zoom-in': () => c.zoomBy(1.25),
    'zoom-out': () => c.zoomBy(0.8),
    'zoom-reset': () => c.resetZoom(),
    history: () => history?.toggle()
  }
  byId<HTMLElement>('actions').addEventListener('click', e => {
    const a = (e.target as Element).closest<HTMLElement>('[data-action]')?.dataset.action
    if (a !== undefined) actions[a]?.()
  })
  const tasks = byId<HTMLElement>('tasks')
  const api = new FairyApi(params.room, currentToken)
  const panel = new FairyPanel({
    doc,
    awareness,
    user,
    api,
    suggestApi,
    room: params.room,
    viewport: () => c.viewportBox(),
    shapeSelection: () => c.selection,
    onChange: () => c.scheduleRender(),
    nodes: {
      list: byId<HTMLElement>('fairies'),
      chat: byId<HTMLElement>('chat'),
      input: byId<HTMLInputElement>('fairy-input'),
      nameInput: byId<HTMLInputElement>('fairy-name'),
      invite: byId<HTMLButtonElement>('invite-fairy'),
      error: byId<HTMLElement>('fairy-error'),
      todo: byId<HTMLElement>('todo'),
      todoTitle: byId<HTMLElement>('todo-title'),
      group: byId<HTMLButtonElement>('group-prompt'),
      projects: byId<HTMLElement>('projects'),
      apply: byId<HTMLSelectElement>('fairy-apply'),
      inviteApply: byId<HTMLInputElement>('invite-apply')
    }
  })
  fairyPanel = panel
  // The cost bar under the chat input: the room's and your model tokens against the budgets.
  const costs = new CostBar(() => new FairyringApi({ token: currentToken }).roomUsage(params.room), () => tokenMayUseFairies(currentToken()))
  byId<HTMLElement>('group-prompt').after(costs.node)
  // Asked once connected (the dev token is there then), and after each change of a fairy's chat.
  conn.on('status', s => { if (s === 'connected') costs.schedule() })
  if (provider.wsconnected) costs.schedule()
  const historyApi = new HistoryApi(params.room, currentToken)
  const historyPanel = new HistoryPanel({
    doc,
    api: historyApi,
    canvas: c,
    people: () => {
      const { users } = readPeers(awareness.getStates() as Map<number, unknown>, awareness.clientID)
      return { me: user, users: new Map(users.map(u => [u.id, { name: u.name, color: u.color }])), names: panel.look().names }
    },
    nodes: {
      panel: byId<HTMLElement>('history'),
      list: byId<HTMLElement>('history-list'),
      toggle: document.querySelector<HTMLElement>('[data-action="history"]'),
      close: byQuery<HTMLElement>('[data-action="history-close"]'),
      message: byId<HTMLElement>('history-message'),
      error: byId<HTMLElement>('history-error'),
      stage: byId<HTMLElement>('stage'),
      canvasSvg: byId<SVGSVGElement>('canvas'),
      preview: byId<HTMLElement>('history-preview'),
      previewSvg: byId<SVGSVGElement>('history-preview-canvas'),
      previewLabel: byId<HTMLElement>('history-preview-label'),
      restore: byQuery<HTMLButtonElement>('[data-action="history-restore"]'),
      takeBack: byQuery<HTMLButtonElement>('[data-action="history-takeback"]'),
      closePreview: byQuery<HTMLButtonElement>('[data-action="history-close-preview"]'),
      tooltip: byId<HTMLElement>('shape-tooltip')
    }
  })
  history = historyPanel
  doc.on('update', () => historyPanel.onDocChange())
  const refreshTasks = (): void => renderTaskList(tasks, doc, panel.look().names)
  awareness.on('change', () => { renderPeople(people, awareness, user, id => panel.look().colors.get(id) ?? undefined); panel.refresh(); historyPanel.renderList() })
  roots(doc).fairies.observeDeep(() => { panel.refresh(true); costs.schedule() })
  doc.getMap('suggestions').observeDeep(() => { panel.refresh(true) })
  doc.getMap('projects').observeDeep(() => { panel.refresh(true); refreshTasks() })
  roots(doc).tasks.observeDeep(() => { refreshTasks(); panel.renderProjects() })
  renderPeople(people, awareness, user, id => panel.look().colors.get(id) ?? undefined)
  panel.refresh(true)
  refreshTasks()
  refreshUi()

  // For debugging in the console and for the browser tests.
  Object.assign(window, { fairyring: { doc, provider, conn, canvas: c, user, fairies: panel, api, suggestApi, history: historyPanel, costs } })
}

start().catch(e => {
  const banner = document.getElementById('banner')
  if (banner !== null) setBanner(banner, `The demo failed to start: ${String(e)}`)
})
