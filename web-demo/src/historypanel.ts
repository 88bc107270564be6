// The History panel (DOM only): the timeline of the room (`data-testid="history-entry"` rows,
// newest first: a person or a fairy, coloured as in the People list, a fairy request with its
// prompt's text), the read-only preview of the canvas as it was after a row (drawn with the
// shape renderer over the dimmed live canvas, following its camera; `data-testid="history-preview"`)
// with *Restore this version* and *Take back everything NAME did since then*, and the hover card
// of a shape (`data-testid="shape-tooltip"`: who created it and who last changed it).
// The timeline is loaded page by page when the panel is first opened (or a shape first hovered),
// then kept up to date, debounced, as the document changes. The document is only read: restore
// and rollback go through the history HTTP API (`HistoryApi`).
import type * as Y from 'yjs'
import type { Canvas } from './canvas.js'
import {
  authorLines, groupEntries, historyNames, mergeEntries, withHistoryNames, promptIndex, refreshAfter, rollbackBody, rowView, shapeAuthors,
  describeRollback, relativeTime, type HistoryGroup, type PeopleContext, type ShapeAuthors
} from './history.js'
import type { HistoryEntry } from '@fairyring/client'
import { HistoryApiError, type HistoryApi } from '@fairyring/client'
import { renderShape } from './render.js'
import { getShape } from './ops.js'
import type { Shape } from '@fairyring/client'
import { h, toDom, type VNode } from './vnode.js'

/** Entries asked for per page, and the most pages read in one refresh (the rest on the next). */
const PAGE_LIMIT = 200
const MAX_PAGES = 50
/**
 * How long the document must be quiet before the timeline is read again (ms), the longest a
 * stream of changes (a fairy drawing) delays it, and when it is read once more after the last
 * change (the server may record an update a moment after the page sent it).
 */
const REFRESH_DEBOUNCE_MS = 400
const REFRESH_MAX_WAIT_MS = 2000
const REFRESH_LATE_MS = 2500
/** Most rows shown (the newest). */
const MAX_ROWS = 300

/** What the panel needs from the page. */
export interface HistoryPanelDeps {
  doc: Y.Doc
  api: HistoryApi
  canvas: Canvas
  people: () => PeopleContext
  nodes: {
    panel: HTMLElement
    list: HTMLElement
    toggle: HTMLElement | null
    close: HTMLElement
    message: HTMLElement
    error: HTMLElement
    stage: HTMLElement
    canvasSvg: SVGSVGElement
    preview: HTMLElement
    previewSvg: SVGSVGElement
    previewLabel: HTMLElement
    restore: HTMLButtonElement
    takeBack: HTMLButtonElement
    closePreview: HTMLButtonElement
    tooltip: HTMLElement
  }
}

function el<K extends keyof HTMLElementTagNameMap> (tag: K, attrs: Record<string, string> = {}, text?: string): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag)
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v)
  if (text !== undefined) e.textContent = text
  return e
}

/** A preview shape's root carries `data-preview-shape-id`: the live shape keeps `data-shape-id` to itself. */
function previewIds (v: VNode): VNode {
  const { 'data-shape-id': id, ...rest } = v.attrs
  return id === undefined ? v : h(v.tag, { ...rest, 'data-preview-shape-id': id }, v.children)
}

export class HistoryPanel {
  private entries: HistoryEntry[] = []
  private groups: HistoryGroup[] = []
  private authors = new Map<string, ShapeAuthors>()
  private learntNames = new Map<string, string>()
  /** Whether the timeline is being kept up to date (from the first open or hover on). */
  private enabled = false
  /** The server refused the timeline (no such route, no access): only opening the panel asks again. */
  private refused = false
  private loaded = false
  private loading = false
  private again = false
  private timer: ReturnType<typeof setTimeout> | undefined
  private lateTimer: ReturnType<typeof setTimeout> | undefined
  private pendingSince: number | null = null
  private listKey = ''
  /** The row whose version is previewed (by its first sequence number), and that version. */
  private selected: HistoryGroup | null = null
  private previewSeq: number | null = null
  private previewShapes = new Map<string, Shape>()
  private previewWorld: SVGGElement | null = null
  private previewToken = 0
  private busy = false
  /** The shape under the pointer (live or in the preview) and where the pointer is. */
  private hovered: { id: string, live: boolean, x: number, y: number } | null = null

  constructor (private readonly d: HistoryPanelDeps) {
    const n = d.nodes
    n.close.addEventListener('click', () => this.close())
    n.list.addEventListener('click', e => {
      const row = (e.target as Element).closest<HTMLElement>('[data-history-entry]')
      if (row !== null) this.choose(Number(row.dataset.historyEntry))
    })
    n.list.addEventListener('keydown', e => {
      const row = (e.target as Element).closest<HTMLElement>('[data-history-entry]')
      if (row !== null && (e.key === 'Enter' || e.key === ' ')) { e.preventDefault(); this.choose(Number(row.dataset.historyEntry)) }
    })
    n.restore.addEventListener('click', () => this.restore())
    n.takeBack.addEventListener('click', () => this.takeBack())
    n.closePreview.addEventListener('click', () => this.closePreview())
    window.addEventListener('keydown', e => { if (e.key === 'Escape' && !n.preview.hidden) this.closePreview() })
    // Pan and zoom still work over the preview: the wheel goes on to the canvas.
    n.preview.addEventListener('wheel', e => {
      e.preventDefault()
      n.canvasSvg.dispatchEvent(new WheelEvent('wheel', {
        deltaX: e.deltaX, deltaY: e.deltaY, deltaMode: e.deltaMode, clientX: e.clientX, clientY: e.clientY,
        ctrlKey: e.ctrlKey, metaKey: e.metaKey, shiftKey: e.shiftKey, bubbles: true, cancelable: true
      }))
    }, { passive: false })
    for (const svg of [n.canvasSvg, n.previewSvg]) {
      svg.addEventListener('pointermove', e => this.hover(e))
      svg.addEventListener('pointerdown', () => this.hideTip())
      svg.addEventListener('pointerleave', () => this.hideTip())
      svg.addEventListener('wheel', () => this.hideTip(), { passive: true })
    }
    this.previewWorld = document.createElementNS('http://www.w3.org/2000/svg', 'g')
    n.previewSvg.replaceChildren(this.previewWorld)
  }

  /** Names and colours of people and fairies: the page's, then those the history gave. */
  private people (): PeopleContext {
    return withHistoryNames(this.d.people(), this.learntNames)
  }

  get isOpen (): boolean { return !this.d.nodes.panel.hidden }

  toggle (): void {
    if (this.isOpen) this.close()
    else this.open()
  }

  open (): void {
    const n = this.d.nodes
    n.panel.hidden = false
    n.toggle?.setAttribute('aria-pressed', 'true')
    this.refused = false
    this.enable()
    this.renderList(true)
    this.d.canvas.scheduleRender()
  }

  close (): void {
    const n = this.d.nodes
    this.closePreview()
    n.panel.hidden = true
    n.toggle?.setAttribute('aria-pressed', 'false')
    this.d.canvas.scheduleRender()
  }

  /** The document changed: read the timeline again once it is quiet. */
  onDocChange (): void {
    if (!this.enabled) return
    const now = Date.now()
    this.pendingSince ??= now
    clearTimeout(this.timer)
    clearTimeout(this.lateTimer)
    this.timer = setTimeout(() => {
      this.pendingSince = null
      this.refresh()
    }, Math.min(REFRESH_DEBOUNCE_MS, Math.max(0, this.pendingSince + REFRESH_MAX_WAIT_MS - now)))
    this.lateTimer = setTimeout(() => this.refresh(), REFRESH_LATE_MS)
  }

  private enable (): void {
    if (this.enabled || this.refused) return
    this.enabled = true
    this.refresh()
  }

  /** Reads the entries after the last known one (page by page, via `next`); one read at a time. */
  refresh (): void {
    if (this.loading) { this.again = true; return }
    this.loading = true
    this.load().then(() => this.showError(null)).catch(e => {
      this.showError(e instanceof HistoryApiError ? e.message : String(e))
      // Asking again at every change would only be refused again.
      if (e instanceof HistoryApiError && [401, 403, 404].includes(e.status)) { this.enabled = false; this.refused = true; this.again = false }
    }).finally(() => {
      this.loading = false
      if (this.again) { this.again = false; this.refresh() }
    })
  }

  private async load (): Promise<void> {
    let after = refreshAfter(this.entries)
    for (let pages = 0; pages < MAX_PAGES; pages++) {
      const page = await this.d.api.history(after, PAGE_LIMIT)
      this.entries = mergeEntries(this.entries, page.entries)
      this.loaded = true
      this.update()
      if (page.next === null || page.next === after) return
      after = page.next
    }
    // More pages than one refresh reads: go on in a moment.
    this.again = true
  }

  private update (): void {
    this.groups = groupEntries(this.entries)
    this.authors = shapeAuthors(this.entries)
    this.learntNames = historyNames(this.entries)
    this.d.nodes.panel.dataset.loaded = 'true'
    this.d.nodes.panel.dataset.lastSeq = String(this.entries[this.entries.length - 1]?.toSeq ?? '')
    this.renderList()
    if (!this.d.nodes.tooltip.hidden) this.showTip()
  }

  /** Redraws the timeline when what it shows changed (names and colours come from awareness). */
  renderList (force = false): void {
    if (this.d.nodes.panel.hidden && !force) return
    const ctx = this.people()
    const prompts = promptIndex(this.d.doc.getMap('fairies'))
    const now = Date.now()
    const shown = this.groups.slice(-MAX_ROWS).reverse()
    const rows = shown.map(g => ({ g, v: rowView(g, ctx, prompts), when: relativeTime(g.until, now) }))
    const key = JSON.stringify([this.loaded, this.groups.length, this.selected?.fromSeq ?? null,
      rows.map(r => [r.g.fromSeq, r.g.toSeq, r.g.added, r.g.updated, r.g.removed, r.v, r.when])])
    if (key === this.listKey) return
    this.listKey = key
    const items: HTMLElement[] = rows.map(({ g, v, when }) => {
      const attrs: Record<string, string> = {
        'data-testid': 'history-entry',
        'data-history-entry': String(g.fromSeq),
        'data-from-seq': String(g.fromSeq),
        'data-to-seq': String(g.toSeq),
        'data-actor-kind': g.actor.kind,
        'data-actor-id': g.actor.id,
        'data-added': g.added.slice(0, 50).join(' '),
        'data-updated': g.updated.slice(0, 50).join(' '),
        'data-removed': g.removed.slice(0, 50).join(' '),
        'aria-selected': String(this.selected?.fromSeq === g.fromSeq),
        tabindex: '0',
        title: 'Show the canvas as it was after this'
      }
      if (g.actor.via !== null) attrs['data-via'] = g.actor.via
      if (g.actor.requestId !== null) attrs['data-request'] = g.actor.requestId
      const li = el('li', attrs)
      const dot = el('span', { class: 'dot' })
      dot.style.background = v.color
      const head = el('div', { class: 'head' })
      head.append(el('span', { class: 'who', 'data-history-who': '' }, v.who))
      if (v.you) head.append(el('span', { class: 'extra' }, '(you)'))
      if (v.kind === 'fairy') head.append(el('span', { class: 'extra' }, 'fairy'))
      const time = el('time', { class: 'when', datetime: new Date(g.until).toISOString() }, when)
      time.title = new Date(g.until).toLocaleString()
      head.append(time)
      const body = el('div', { class: 'body' })
      body.append(head, el('div', { class: 'what' }, v.what))
      if (v.prompt !== null) body.append(el('div', { class: 'prompt', 'data-history-prompt': '' }, `“${v.prompt}”`))
      if (v.detail !== '') body.append(el('div', { class: 'detail' }, v.detail))
      li.append(dot, body)
      return li
    })
    if (items.length === 0) items.push(el('li', { class: 'empty' }, this.loaded ? 'Nothing has been drawn in this room yet.' : 'Loading the history…'))
    if (this.groups.length > MAX_ROWS) items.push(el('li', { class: 'empty' }, `${this.groups.length - MAX_ROWS} older rows are not shown.`))
    this.d.nodes.list.replaceChildren(...items)
  }

  private showError (message: string | null): void {
    const e = this.d.nodes.error
    e.hidden = message === null
    e.textContent = message ?? ''
  }

  private showMessage (message: string | null): void {
    const m = this.d.nodes.message
    m.hidden = message === null
    m.textContent = message ?? ''
  }

  // ---- the preview --------------------------------------------------------------------------

  /** A click on a row: preview the canvas as it was after it (a second click closes the preview). */
  choose (fromSeq: number): void {
    const g = this.groups.find(x => x.fromSeq === fromSeq)
    if (g === undefined) return
    if (this.selected?.fromSeq === fromSeq && !this.d.nodes.preview.hidden) { this.closePreview(); return }
    this.showPreview(g)
  }

  private showPreview (g: HistoryGroup): void {
    const n = this.d.nodes
    const ctx = this.people()
    const v = rowView(g, ctx, promptIndex(this.d.doc.getMap('fairies')))
    this.selected = g
    this.previewSeq = g.toSeq
    this.previewShapes = new Map()
    this.previewWorld?.replaceChildren()
    const token = ++this.previewToken
    // Nothing live stays selected under the preview (Delete would act on it unseen).
    this.d.canvas.select([])
    this.showMessage(null)
    n.preview.hidden = false
    n.preview.dataset.state = 'loading'
    n.preview.dataset.seq = String(g.toSeq)
    n.preview.dataset.shapes = '0'
    n.previewLabel.textContent = `Loading the canvas as it was after ${v.who}…`
    n.restore.disabled = true
    n.takeBack.hidden = v.takeBack === null
    n.takeBack.textContent = `Take back everything ${v.takeBack ?? ''} did since then`
    n.takeBack.disabled = true
    this.renderList()
    this.d.api.version(g.toSeq).then(version => {
      if (token !== this.previewToken) return
      this.previewShapes = new Map(version.shapes.map(s => [s.id, s]))
      this.previewWorld?.replaceChildren(...version.shapes.map(s => toDom(previewIds(renderShape({ ...s, locked: false })))))
      this.syncCamera()
      n.preview.dataset.state = 'ready'
      n.preview.dataset.shapes = String(version.shapes.length)
      const what = v.prompt !== null ? `${v.who} (“${v.prompt}”)` : v.who
      const then = version.shapes.length
      const now = this.d.canvas.shapeCount()
      n.previewLabel.textContent = `As it was after ${what} ${v.what}, ${relativeTime(g.until, Date.now())}: ` +
        `${then} shape${then === 1 ? '' : 's'} then, ${now} now · read-only preview`
      n.restore.disabled = false
      n.takeBack.disabled = false
    }).catch(e => {
      if (token !== this.previewToken) return
      n.preview.dataset.state = 'error'
      n.previewLabel.textContent = `Could not load that version: ${e instanceof HistoryApiError ? e.message : String(e)}`
      n.takeBack.disabled = false
    })
  }

  closePreview (): void {
    const n = this.d.nodes
    this.previewToken++
    this.selected = null
    this.previewSeq = null
    this.previewShapes = new Map()
    this.previewWorld?.replaceChildren()
    n.preview.hidden = true
    delete n.preview.dataset.state
    delete n.preview.dataset.seq
    this.hideTip()
    this.renderList()
  }

  /** Keeps the preview on the live canvas's camera (called after each canvas frame). */
  syncCamera (): void {
    if (this.previewWorld === null || this.d.nodes.preview.hidden) return
    const cam = this.d.canvas.cam
    this.previewWorld.setAttribute('transform', `scale(${cam.zoom}) translate(${-cam.x},${-cam.y})`)
  }

  private restore (): void {
    const seq = this.previewSeq
    if (seq === null || this.busy) return
    this.act(async () => {
      await this.d.api.restore(seq)
      this.showMessage(`Restored the canvas as it was after update ${seq}.`)
    })
  }

  private takeBack (): void {
    const g = this.selected
    const body = g !== null ? rollbackBody(g) : null
    if (g === null || body === null || this.busy) return
    const name = rowView(g, this.people(), new Map()).who
    this.act(async () => {
      const answer = await this.d.api.rollback(body)
      this.showMessage(describeRollback(answer, name))
    })
  }

  /** Runs a restore or rollback: buttons disabled meanwhile; the preview closes once it is done. */
  private act (call: () => Promise<void>): void {
    const n = this.d.nodes
    this.busy = true
    n.restore.disabled = true
    n.takeBack.disabled = true
    call().then(() => {
      this.showError(null)
      this.closePreview()
      this.refresh()
    }).catch(e => {
      this.showError(e instanceof HistoryApiError ? e.message : String(e))
      n.restore.disabled = this.previewSeq === null
      n.takeBack.disabled = false
    }).finally(() => { this.busy = false })
  }

  // ---- the hover card -----------------------------------------------------------------------

  private hover (e: PointerEvent): void {
    if (e.buttons !== 0) { this.hideTip(); return }
    const target = e.target instanceof Element ? e.target.closest('[data-shape-id],[data-preview-shape-id]') : null
    const id = target?.getAttribute('data-shape-id') ?? target?.getAttribute('data-preview-shape-id') ?? null
    if (id === null) { this.hideTip(); return }
    this.hovered = { id, live: target?.hasAttribute('data-shape-id') === true, x: e.clientX, y: e.clientY }
    // The hover card reads the timeline: start keeping it (the panel need not be open).
    this.enable()
    this.showTip()
  }

  /** Fills and places the hover card of the hovered shape (again when the timeline was read). */
  private showTip (): void {
    const hv = this.hovered
    if (hv === null) return
    const { id, live } = hv
    const createdBy = (live ? getShape(this.d.doc, id) : this.previewShapes.get(id))?.createdBy ?? ''
    const lines = authorLines(id, createdBy, this.authors, this.people(), promptIndex(this.d.doc.getMap('fairies')), Date.now())
    const tip = this.d.nodes.tooltip
    tip.dataset.shape = id
    tip.dataset.createdBy = lines.createdBy !== null ? `${lines.createdBy.kind}:${lines.createdBy.id}` : ''
    tip.dataset.changedBy = lines.changedBy !== null ? `${lines.changedBy.kind}:${lines.changedBy.id}` : ''
    const parts = [el('div', { class: 'created' }, lines.created)]
    if (lines.changed !== null) parts.push(el('div', { class: 'changed' }, lines.changed))
    tip.replaceChildren(...parts)
    tip.hidden = false
    const r = this.d.nodes.stage.getBoundingClientRect()
    const x = Math.min(hv.x - r.left + 14, Math.max(0, r.width - tip.offsetWidth - 4))
    const y = Math.min(hv.y - r.top + 16, Math.max(0, r.height - tip.offsetHeight - 4))
    tip.style.left = `${Math.round(x)}px`
    tip.style.top = `${Math.round(y)}px`
  }

  private hideTip (): void {
    this.hovered = null
    const tip = this.d.nodes.tooltip
    if (tip.hidden) return
    tip.hidden = true
    delete tip.dataset.shape
  }
}
