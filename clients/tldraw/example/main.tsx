// The example page: tldraw 5 on a fairyring room. Reads `server` (a ws:// or http:// base,
// default this page's origin), `room` (default `demo`), `token` and `name` from the query
// string; without a token it asks `POST /auth/dev-token` of the server (dev mode). Exposes
// `window.editor` (the tldraw Editor), `window.fairyringSynced` (resolves after the first
// sync, once the room is shown in tldraw) and `window.fairyringLoaded` (once every shape is in:
// a large room enters viewport first). A small fairy panel invites, prompts with the current
// viewport, stops and rejects through @fairyring/client's API client, and lists a fairy's
// pending suggestions (review mode, drawn as ghosts by `bindReview`) to accept or reject.
import { createRoot } from 'react-dom/client'
import React, { useEffect, useState } from 'react'
import { GeoShapeUtil, Tldraw, renderHtmlFromRichTextForMeasurement, type Editor } from 'tldraw'
import { getAssetUrlsByImport } from '@tldraw/assets/imports'
import {
  FairyringApi, RoomConnection, fetchDevToken, readFairyChats, peersOf, httpBase, type TokenSource, type FairyChat
} from '@fairyring/client'
import {
  bindPresence, bindReview, bindTldraw, fairyringShapeUtils, isGhostId, labelHtml, labelsWaiting, measuredLabelSize, plainText, type ReviewBinding
} from '../src/index.js'
import type { Ghost } from '@fairyring/client'
import 'tldraw/tldraw.css'

declare const TLDRAW_LICENSE_KEY: string

const q = new URLSearchParams(location.search)
const server = httpBase(q.get('server') ?? location.origin)
const room = q.get('room') ?? 'demo'
const name = q.get('name') ?? 'tldraw user'
const urlToken = q.get('token')
// `load=all` puts a large room in tldraw in one step instead of viewport first (for comparison).
const load = q.get('load') === 'all' ? 'all' : 'viewport'
// `utils=default`: tldraw's own shape utils instead of the binding's (for comparison).
const shapeUtils = q.get('utils') === 'default' ? [] : fairyringShapeUtils

let resolveSynced: () => void = () => {}
const synced = new Promise<void>(resolve => { resolveSynced = resolve })
let resolveLoaded: () => void = () => {}
const loadedAll = new Promise<void>(resolve => { resolveLoaded = resolve })
const w = window as unknown as Record<string, unknown>
w.fairyringSynced = synced
w.fairyringLoaded = loadedAll

let sub = `guest-${Math.random().toString(36).slice(2, 8)}`
let currentToken: string | null = urlToken
const token: TokenSource = async () => {
  if (urlToken !== null) return urlToken
  const dev = await fetchDevToken(name, undefined, server)
  if (dev === null) return null
  sub = dev.sub
  currentToken = dev.token
  return { token: dev.token, expiresAt: dev.expiresAt }
}
const conn = new RoomConnection({ server, room, token })
// When the first sync ended (tldraw may still be mounting then): the open figures start here too.
conn.whenSynced().then(() => { w.fairyringSyncedAt = performance.now() }).catch(() => {})
// tldraw's fonts, icons and translations, as files beside the page (bundled from @tldraw/assets).
// Made once: a new object at each render would make <Tldraw> build a new editor.
const assetUrls = getAssetUrlsByImport({ baseUrl: new URL('.', location.href).href })
const api = new FairyringApi({ baseUrl: server, token: () => conn.token ?? currentToken })
// What the browser test reads: the document, and the geo labels' batch measurement beside tldraw's own.
w.fairyring = {
  conn, api, doc: conn.doc, plainText, room, labelHtml, labelsWaiting, measuredLabelSize,
  tldrawLabelHtml: renderHtmlFromRichTextForMeasurement,
  tldrawLabelSize: (ed: Editor, shape: unknown) => (GeoShapeUtil.prototype as unknown as { getUnscaledLabelSize: (s: unknown) => unknown }).getUnscaledLabelSize.call(ed.getShapeUtil('geo'), shape)
}

function FairyPanel ({ editor }: { editor: Editor }): React.JSX.Element {
  const [fairies, setFairies] = useState<FairyChat[]>([])
  const [working, setWorking] = useState<Set<string>>(new Set())
  const [selected, setSelected] = useState<string | null>(null)
  const [message, setMessage] = useState('')
  const [status, setStatus] = useState('')
  const [suggest, setSuggest] = useState(false)
  useEffect(() => {
    const root = conn.doc.getMap('fairies')
    const refresh = (): void => {
      const list = readFairyChats(root)
      setFairies(list)
      setWorking(new Set(peersOf(conn.awareness).fairies.filter(f => f.mode !== 'idling').map(f => f.id)))
      setSelected(s => s ?? list[0]?.id ?? null)
    }
    root.observeDeep(refresh)
    conn.awareness.on('change', refresh)
    refresh()
    return () => { root.unobserveDeep(refresh); conn.awareness.off('change', refresh) }
  }, [])
  const run = (what: string, p: Promise<unknown>): void => {
    setStatus(`${what}…`)
    p.then(() => setStatus(`${what}: done`), (e: unknown) => setStatus(`${what}: ${e instanceof Error ? e.message : String(e)}`))
  }
  const lastRequest = (id: string): string | null => {
    const chat = fairies.find(f => f.id === id)?.chat ?? []
    for (let i = chat.length - 1; i >= 0; i--) { const r = chat[i]?.requestId; if (r != null && chat[i]?.rejected !== true) return r }
    return null
  }
  return (
    <div className='fr-panel' data-fairy-panel onPointerDown={e => e.stopPropagation()}>
      <h2>Fairies</h2>
      <button data-action='invite-fairy' onClick={() => run('invite', api.inviteFairy(room, suggest ? { apply: 'suggest' } : {}).then(f => setSelected(f.id)))}>Invite a fairy</button>
      <label><input type='checkbox' data-invite-apply checked={suggest} onChange={e => setSuggest(e.target.checked)} /> review mode</label>
      <ul>
        {fairies.map(f => (
          <li key={f.id} data-fairy-item={f.id} aria-selected={f.id === selected} onClick={() => setSelected(f.id)}>
            {f.name}{working.has(f.id) ? ' (working)' : ''}
          </li>
        ))}
      </ul>
      <input data-fairy-input placeholder='Ask the fairy…' value={message} onChange={e => setMessage(e.target.value)}
        onKeyDown={e => {
          e.stopPropagation()
          if (e.key !== 'Enter' || selected === null || message.trim() === '') return
          const vp = editor.getViewportPageBounds()
          const selectedShapeIds = editor.getSelectedShapeIds().filter(id => !isGhostId(id)).map(id => id.replace(/^shape:/, ''))
          run('prompt', api.promptFairy(room, selected, { message: message.trim(), bounds: { x: vp.x, y: vp.y, w: vp.w, h: vp.h }, selectedShapeIds }))
          setMessage('')
        }} />
      <button data-action='cancel-fairy' disabled={selected === null} onClick={() => selected !== null && run('stop', api.cancelFairy(room, selected))}>Stop</button>
      <button data-action='reject-request' disabled={selected === null} onClick={() => {
        const rid = selected !== null ? lastRequest(selected) : null
        if (selected !== null && rid !== null) run('reject', api.revertRequest(room, selected, rid))
      }}>Reject last request</button>
      <div className='fr-status' data-fairy-status>{status}</div>
      <ReviewList />
    </div>
  )
}

function onMount (ed: Editor): () => void {
  w.editor = ed
  mountedEditor.set(ed)
  let stop = (): void => {}
  let stopped = false
  conn.whenSynced().then(() => {
    if (stopped) return
    // How long the room takes to show: from the first sync to the frame after the binding put
    // it in tldraw (a large room: the shapes in and around the viewport; `fairyringLoaded`
    // resolves once all of them are in, `fairyringLoadedMs` after).
    const t0 = performance.now()
    const binding = bindTldraw(ed, conn.doc, { createdBy: `user:${sub}`, load })
    const presence = bindPresence(ed, conn.awareness as never, { id: sub, name })
    const review = bindReview(ed, conn.doc, { room, api })
    w.fairyringBindMs = performance.now() - t0
    w.fairyringReview = review
    reviewHolder.set(review)
    stop = () => { binding.dispose(); presence.dispose(); review.dispose() }
    requestAnimationFrame(() => requestAnimationFrame(() => {
      w.fairyringOpenMs = performance.now() - t0
      w.fairyringOpenFromSyncMs = performance.now() - (w.fairyringSyncedAt as number ?? t0)
      w.fairyringOpenShapes = ed.getCurrentPageShapeIds().size
      resolveSynced()
    }))
    binding.loaded.then(() => requestAnimationFrame(() => requestAnimationFrame(() => {
      w.fairyringLoadedMs = performance.now() - t0
      w.fairyringLoadedFromSyncMs = performance.now() - (w.fairyringSyncedAt as number ?? t0)
      resolveLoaded()
    }))).catch(e => console.error(e))
  }).catch(e => console.error(e))
  return () => { stopped = true; stop() }
}

/** The review binding the panel lists and decides with, once the room is bound. */
const reviewHolder = {
  review: null as ReviewBinding | null,
  listeners: new Set<(r: ReviewBinding) => void>(),
  set (r: ReviewBinding): void { this.review = r; for (const l of this.listeners) l(r) }
}

/** A fairy's pending suggestions (review mode), each with Accept and Reject. */
function ReviewList (): React.JSX.Element | null {
  const [review, setReview] = useState<ReviewBinding | null>(reviewHolder.review)
  const [pending, setPending] = useState<Ghost[]>([])
  const [status, setStatus] = useState('')
  useEffect(() => {
    reviewHolder.listeners.add(setReview)
    return () => { reviewHolder.listeners.delete(setReview) }
  }, [])
  useEffect(() => {
    if (review === null) return
    setPending(review.pending())
    return review.onChange(list => setPending([...list]))
  }, [review])
  if (review === null || pending.length === 0) return null
  const decide = (what: string, p: Promise<unknown>): void => {
    setStatus(`${what}…`)
    p.then(() => setStatus(`${what}: done`), (e: unknown) => setStatus(`${what}: ${e instanceof Error ? e.message : String(e)}`))
  }
  return (
    <div data-review-list>
      <h2>Suggestions</h2>
      <ul>
        {pending.map(g => (
          <li key={g.id} data-suggestion={g.id} data-op={g.op}>
            {g.op} {g.proposed?.type ?? g.current?.type ?? ''}{g.streaming ? ' (drafting)' : ''}{' '}
            <button data-action='accept-suggestion' disabled={g.streaming} onClick={() => decide('accept', review.accept(g.id))}>Accept</button>
            <button data-action='reject-suggestion' onClick={() => decide('reject', review.reject(g.id))}>Reject</button>
          </li>
        ))}
      </ul>
      <div className='fr-status' data-review-status>{status}</div>
    </div>
  )
}

/** The editor the fairy panel works with, once tldraw has made it. */
const mountedEditor = {
  editor: null as Editor | null,
  listeners: new Set<(e: Editor) => void>(),
  set (e: Editor): void { this.editor = e; for (const l of this.listeners) l(e) }
}

function App (): React.JSX.Element {
  const [editor, setEditor] = useState<Editor | null>(mountedEditor.editor)
  useEffect(() => {
    mountedEditor.listeners.add(setEditor)
    return () => { mountedEditor.listeners.delete(setEditor) }
  }, [])
  return (
    <>
      <Tldraw assetUrls={assetUrls} shapeUtils={shapeUtils} onMount={onMount} licenseKey={TLDRAW_LICENSE_KEY !== '' ? TLDRAW_LICENSE_KEY : undefined} />
      {editor !== null && <FairyPanel editor={editor} />}
    </>
  )
}

const root = document.getElementById('root')
if (root !== null) createRoot(root).render(<App />)
