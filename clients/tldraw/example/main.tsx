// The example page: tldraw 5 on a fairyring room. Reads `server` (a ws:// or http:// base,
// default this page's origin), `room` (default `demo`), `token` and `name` from the query
// string; without a token it asks `POST /auth/dev-token` of the server (dev mode). Exposes
// `window.editor` (the tldraw Editor) and `window.fairyringSynced` (resolves after the first
// sync, once the room is in tldraw). A small fairy panel invites, prompts with the current
// viewport, stops and rejects through @fairyring/client's API client.
import { createRoot } from 'react-dom/client'
import React, { useEffect, useState } from 'react'
import { Tldraw, type Editor } from 'tldraw'
import { getAssetUrlsByImport } from '@tldraw/assets/imports'
import {
  FairyringApi, RoomConnection, fetchDevToken, readFairyChats, peersOf, httpBase, type TokenSource, type FairyChat
} from '@fairyring/client'
import { bindPresence, bindTldraw, plainText } from '../src/index.js'
import 'tldraw/tldraw.css'

declare const TLDRAW_LICENSE_KEY: string

const q = new URLSearchParams(location.search)
const server = httpBase(q.get('server') ?? location.origin)
const room = q.get('room') ?? 'demo'
const name = q.get('name') ?? 'tldraw user'
const urlToken = q.get('token')

let resolveSynced: () => void = () => {}
const synced = new Promise<void>(resolve => { resolveSynced = resolve })
const w = window as unknown as Record<string, unknown>
w.fairyringSynced = synced

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
// tldraw's fonts, icons and translations, as files beside the page (bundled from @tldraw/assets).
// Made once: a new object at each render would make <Tldraw> build a new editor.
const assetUrls = getAssetUrlsByImport({ baseUrl: new URL('.', location.href).href })
const api = new FairyringApi({ baseUrl: server, token: () => conn.token ?? currentToken })
w.fairyring = { conn, api, doc: conn.doc, plainText, room }

function FairyPanel ({ editor }: { editor: Editor }): React.JSX.Element {
  const [fairies, setFairies] = useState<FairyChat[]>([])
  const [working, setWorking] = useState<Set<string>>(new Set())
  const [selected, setSelected] = useState<string | null>(null)
  const [message, setMessage] = useState('')
  const [status, setStatus] = useState('')
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
      <button data-action='invite-fairy' onClick={() => run('invite', api.inviteFairy(room, {}).then(f => setSelected(f.id)))}>Invite a fairy</button>
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
          const selectedShapeIds = editor.getSelectedShapeIds().map(id => id.replace(/^shape:/, ''))
          run('prompt', api.promptFairy(room, selected, { message: message.trim(), bounds: { x: vp.x, y: vp.y, w: vp.w, h: vp.h }, selectedShapeIds }))
          setMessage('')
        }} />
      <button data-action='cancel-fairy' disabled={selected === null} onClick={() => selected !== null && run('stop', api.cancelFairy(room, selected))}>Stop</button>
      <button data-action='reject-request' disabled={selected === null} onClick={() => {
        const rid = selected !== null ? lastRequest(selected) : null
        if (selected !== null && rid !== null) run('reject', api.revertRequest(room, selected, rid))
      }}>Reject last request</button>
      <div className='fr-status' data-fairy-status>{status}</div>
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
    // How long the room takes to show: from the first sync to the frame after the binding put it in tldraw.
    const t0 = performance.now()
    const binding = bindTldraw(ed, conn.doc, { createdBy: `user:${sub}` })
    const presence = bindPresence(ed, conn.awareness as never, { id: sub, name })
    w.fairyringBindMs = performance.now() - t0
    stop = () => { binding.dispose(); presence.dispose() }
    requestAnimationFrame(() => requestAnimationFrame(() => {
      w.fairyringOpenMs = performance.now() - t0
      resolveSynced()
    }))
  }).catch(e => console.error(e))
  return () => { stopped = true; stop() }
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
      <Tldraw assetUrls={assetUrls} onMount={onMount} licenseKey={TLDRAW_LICENSE_KEY !== '' ? TLDRAW_LICENSE_KEY : undefined} />
      {editor !== null && <FairyPanel editor={editor} />}
    </>
  )
}

const root = document.getElementById('root')
if (root !== null) createRoot(root).render(<App />)
