// Entry point: reads the URL (an invalid room name becomes its slug, shown in the URL), gets a
// token, opens the room with @fairyring/client's `RoomConnection` (official yjs + y-websocket;
// in dev mode a new dev token before every reconnect, so a restarted server is met quietly),
// publishes presence, and wires the canvas, the panels, the toolbar (zoom label, exports) and
// the collapsible sidebar together. Never logs a token.
import {
  RoomConnection, fetchDevToken, TokenError, colorForId, COLOR_NAMES, FILL_NAMES, swatch, describeClose, describeRefusal,
  describeStalled, FairyApi, FairyringApi, ApiError, SuggestApi, SuggestApiError, HistoryApi, readPeers, type DevToken, type TokenSource
} from '@fairyring/client'
import { CostBar, tokenMayUseFairies } from './costs.js'
import { cleanName, parseParams, urlWithRoom } from './params.js'
import { sidebarCollapsedFor, zoomLabel, NARROW_WIDTH } from './keyboard.js'
import { Canvas } from './canvas.js'
import { TOOLS } from './tools.js'
import { addIcon } from './icons.js'
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
  // The URL names the room this page opened: a link with an invalid name opens its slug, the
  // same one for everyone who follows it.
  const askedRoom = new URLSearchParams(location.search).get('room')
  if (params.roomWasInvalid) window.history.replaceState(window.history.state, '', urlWithRoom(location.href, params.room))
  setupSidebar()

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
  // Dev tokens are free: one before every reconnect, so a restarted server (a new secret) never
  // sees the old token, and no socket is opened while the server is down.
  const conn = new RoomConnection({
    server: location.origin, room: params.room, renewOnReconnect: devMode, ...(tokenSource !== undefined ? { token: tokenSource } : {})
  })
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
  // In dev mode a refused token (a server restarted with a new secret) is replaced quietly: a
  // new dev token and a reconnect, at most 3 times a minute before the banner asks.
  let quietTries: number[] = []
  let retryTimer: ReturnType<typeof setTimeout> | undefined
  const quietRecover = (): boolean => {
    if (!devMode) return false
    const now = Date.now()
    quietTries = quietTries.filter(t => now - t < 60_000)
    if (quietTries.length >= 3) return false
    quietTries.push(now)
    refused = false
    setBanner(banner, null)
    setStatus(status, 'connecting', 'getting a new dev token')
    conn.connect().catch(() => undefined)
    return true
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
    if (message === null) return
    if (r.status === 401 && quietRecover()) return
    refuse(message)
  })
  let tokenFailures = 0
  conn.on('token', () => { tokenFailures = 0 })
  conn.on('error', e => {
    if (devMode) {
      // The dev-token route could not be reached (the server is restarting): try again by
      // itself, backing off, and say so in the status bar only.
      tokenFailures++
      setStatus(status, 'offline', describeStalled(tokenFailures) ?? '')
      clearTimeout(retryTimer)
      retryTimer = setTimeout(() => { conn.connect().catch(() => undefined) }, Math.min(200 * 2 ** tokenFailures, 5000))
      return
    }
    setBanner(banner, `Could not get a new token: ${e.message}`, { label: 'Try again', run: recover })
  })
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
    addIcon(b, t.name)
    toolbar.appendChild(b)
  }
  // The actions with an icon (words on wide screens, icons below LABELS_WIDTH: one line at 800 px).
  for (const b of document.querySelectorAll<HTMLElement>('#actions [data-action]')) addIcon(b, b.dataset.action ?? '')
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
  if (params.roomWasInvalid && askedRoom !== null) {
    toast(`"${askedRoom.slice(0, 60)}" is not a room name (1–128 of A–Z a–z 0–9 . _ -): this is room "${params.room}".`)
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
    fairyLook: () => fairyPanel?.look() ?? { hats: new Map(), colors: new Map(), selected: new Set(), names: new Map(), own: new Map() },
    onFairyClick: (id, additive) => fairyPanel?.click(id, additive),
    onRender: () => { history?.syncCamera(); showZoom() },
    onDecide: (id, decision) => suggestApi.decide(id, decision).then(() => undefined, e => toast(e instanceof SuggestApiError ? e.message : String(e))),
    covers: () => [byId<HTMLElement>('sidebar')]
  })
  const c = canvas
  const zoomButton = byQuery<HTMLButtonElement>('[data-action="zoom-reset"]')
  let shownZoom = ''
  function showZoom (): void {
    const label = zoomLabel(c.cam.zoom)
    if (label === shownZoom) return
    shownZoom = label
    zoomButton.textContent = label
    zoomButton.dataset.zoom = String(c.cam.zoom)
    zoomButton.setAttribute('aria-label', `zoom ${label}: reset to 100%`)
  }
  showZoom()
  // The sidebar opening or closing resizes the canvas without a window resize.
  // The sidebar opening over a narrow canvas changes what of it is visible (bubbles move out from under it).
  const resized = new ResizeObserver(() => c.setCamera(c.cam))
  resized.observe(byId<SVGSVGElement>('canvas'))
  resized.observe(byId<HTMLElement>('sidebar'))
  const exporter = new FairyringApi({ token: currentToken })
  const exportAs = async (format: 'png' | 'svg'): Promise<void> => {
    try {
      const body = format === 'png' ? await exporter.exportPng(params.room) : await exporter.exportSvg(params.room)
      const blob = new Blob([body as BlobPart], { type: format === 'png' ? 'image/png' : 'image/svg+xml' })
      const a = document.createElement('a')
      a.href = URL.createObjectURL(blob)
      a.download = `${params.room}.${format}`
      document.body.appendChild(a)
      a.click()
      a.remove()
      setTimeout(() => URL.revokeObjectURL(a.href), 10_000)
    } catch (e) {
      const code = e instanceof ApiError ? e.code : ''
      toast(code === 'empty_page' || code === 'room_not_found'
        ? 'Nothing to export yet: draw something first.'
        : `Export failed: ${e instanceof Error ? e.message : String(e)}`)
    }
  }
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
    'export-png': () => { void exportAs('png') },
    'export-svg': () => { void exportAs('svg') },
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
  keyboardFairyList(byId<HTMLElement>('fairies'), (id, additive) => panel.click(id, additive))
  const historyApi = new HistoryApi(params.room, currentToken)
  const historyPanel = new HistoryPanel({
    doc,
    api: historyApi,
    canvas: c,
    people: () => {
      const { users } = readPeers(awareness.getStates() as Map<number, unknown>, awareness.clientID)
      const look = panel.look()
      return { me: user, users: new Map(users.map(u => [u.id, { name: u.name, color: u.color }])), names: look.names, fairyColors: look.own }
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

/**
 * The sidebar's toggle (`data-action="sidebar-toggle"`): collapsed by default below
 * `NARROW_WIDTH` px (the canvas keeps the width), open above; the choice holds until the
 * window crosses that width.
 */
function setupSidebar (): void {
  const toggle = byQuery<HTMLButtonElement>('[data-action="sidebar-toggle"]')
  const set = (open: boolean): void => {
    document.body.dataset.sidebar = open ? 'open' : 'closed'
    toggle.setAttribute('aria-expanded', String(open))
    toggle.title = open ? 'Hide the side panel' : 'Show the side panel (style, people, fairies, chat)'
  }
  set(!sidebarCollapsedFor(window.innerWidth))
  toggle.addEventListener('click', () => set(document.body.dataset.sidebar !== 'open'))
  window.matchMedia(`(max-width: ${NARROW_WIDTH - 1}px)`).addEventListener('change', e => set(!e.matches))
}

/**
 * Keyboard access to the fairies list (its rows are drawn by the fairy panel): each row is
 * focusable, Enter or Space selects it (Shift adds), and focus stays on the same fairy's row
 * when the list is drawn again.
 */
function keyboardFairyList (list: HTMLElement, click: (id: string, additive: boolean) => void): void {
  let focused: string | null = null
  const mark = (): void => {
    for (const li of list.querySelectorAll<HTMLElement>('[data-fairy-item]')) {
      if (!li.hasAttribute('tabindex')) li.tabIndex = 0
    }
    if (focused !== null && (document.activeElement === document.body || document.activeElement === null)) {
      list.querySelector<HTMLElement>(`[data-fairy-item="${CSS.escape(focused)}"]`)?.focus()
    }
  }
  list.setAttribute('aria-label', 'fairies: Enter selects one, Shift+Enter adds or removes it')
  new MutationObserver(mark).observe(list, { childList: true, subtree: true })
  list.addEventListener('focusin', e => {
    focused = (e.target as Element).closest<HTMLElement>('[data-fairy-item]')?.dataset.fairyItem ?? null
  })
  list.addEventListener('focusout', e => {
    if (e.relatedTarget instanceof Node && !list.contains(e.relatedTarget)) focused = null
  })
  list.addEventListener('keydown', e => {
    const li = e.target instanceof HTMLElement && e.target.matches('[data-fairy-item]') ? e.target : null
    const id = li?.dataset.fairyItem
    if (id === undefined || (e.key !== 'Enter' && e.key !== ' ')) return
    e.preventDefault()
    click(id, e.shiftKey)
  })
  mark()
}

start().catch(e => {
  const banner = document.getElementById('banner')
  if (banner !== null) setBanner(banner, `The demo failed to start: ${String(e)}`)
})
