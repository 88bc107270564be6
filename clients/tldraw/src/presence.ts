// Presence between a room's awareness and tldraw: other people (`{user, cursor, selection,
// viewport}`) and fairies (`{fairy: {id, name, x, y, mode, …}}`, read as untrusted input by
// @fairyring/client) become tldraw `instance_presence` records — so `editor.getCollaborators()`
// lists them, with their name, colour and cursor, a fairy's thought as its chat bubble — and the
// local person's cursor, selection, viewport and page are published in the room's awareness.
// Records enter the store through `mergeRemoteChanges`; none is ever written to the document.
import { peersOf, colorForId, publishPresence, type AwarenessLike, type PeerFairy, type PeerUser } from '@fairyring/client'
import { InstancePresenceRecordType, type Editor, type TLInstancePresence, type TLPageId, type TLShapeId } from 'tldraw'

/** The colour fairies wear as collaborators (the web demo's fairy pink) unless told another. */
export const FAIRY_COLOR = '#e64980'

/** The awareness a presence binding needs (y-protocols' `Awareness`). */
export interface PresenceAwareness extends AwarenessLike {
  on: (event: 'change', fn: () => void) => void
  off: (event: 'change', fn: () => void) => void
}

/** Who the local person is. */
export interface LocalPerson { id: string, name: string, color?: string }

/** The `userId` a fairy's collaborator record has (tldraw's user ids start with `user:`). */
export const fairyUserId = (fairyId: string): string => `user:fairy:${fairyId}`
/** The `userId` a person's collaborator record has: `user:` and their token's `sub`. */
export const personUserId = (sub: string): string => `user:${sub}`

/** The presence record of another person. */
export function personPresence (p: PeerUser, pageId: TLPageId, seen: number): TLInstancePresence {
  const vp = p.viewport
  return InstancePresenceRecordType.create({
    id: InstancePresenceRecordType.createId(`peer-${p.clientId}`),
    userId: personUserId(p.id),
    userName: p.name,
    color: p.color,
    cursor: p.cursor !== null ? { x: p.cursor.x, y: p.cursor.y, type: 'default', rotation: 0 } : null,
    camera: vp !== null ? { x: -vp.x, y: -vp.y, z: 1 } : null,
    screenBounds: vp !== null ? { x: 0, y: 0, w: vp.w, h: vp.h } : null,
    selectedShapeIds: p.selection.map(id => `shape:${id}` as TLShapeId),
    currentPageId: pageId,
    lastActivityTimestamp: seen
  } as unknown as TLInstancePresence)
}

/** The presence record of a fairy: its name, colour, position, and its thought as the chat bubble. */
export function fairyPresence (f: PeerFairy, pageId: TLPageId, color: string, seen: number): TLInstancePresence {
  return InstancePresenceRecordType.create({
    id: InstancePresenceRecordType.createId(`fairy-${f.clientId}`),
    userId: fairyUserId(f.id),
    userName: f.name,
    color,
    cursor: { x: f.x, y: f.y, type: 'default', rotation: 0 },
    camera: null,
    screenBounds: null,
    selectedShapeIds: [],
    currentPageId: pageId,
    chatMessage: (f.thinking !== '' ? f.thinking : f.lastMessage).slice(0, 200),
    lastActivityTimestamp: seen,
    meta: { fairy: true, mode: f.mode, pose: f.pose, taskId: f.taskId ?? null }
  } as unknown as TLInstancePresence)
}

/** A running presence binding. */
export interface PresenceBinding { dispose: () => void }

/**
 * Mirrors the room's awareness into `editor` as collaborators and publishes the local person's
 * presence (at most every `throttleMs`, default 50 ms). `fairyColor` may give a fairy its
 * project's colour.
 */
export function bindPresence (editor: Editor, awareness: PresenceAwareness, me: LocalPerson, opts: { throttleMs?: number, fairyColor?: (f: PeerFairy) => string | null } = {}): PresenceBinding {
  const color = me.color ?? colorForId(me.id)
  const lastSeen = new Map<string, { key: string, at: number }>()
  const sync = (): void => {
    const { users, fairies } = peersOf(awareness)
    const pageId = editor.getCurrentPageId()
    const now = Date.now()
    const seen = (id: string, state: unknown): number => {
      const key = JSON.stringify(state)
      const prev = lastSeen.get(id)
      if (prev !== undefined && prev.key === key) return prev.at
      lastSeen.set(id, { key, at: now })
      return now
    }
    const want: TLInstancePresence[] = [
      ...users.filter(u => u.id !== me.id).map(u => personPresence(u, pageId, seen(`peer-${u.clientId}`, u))),
      ...fairies.map(f => fairyPresence(f, pageId, opts.fairyColor?.(f) ?? FAIRY_COLOR, seen(`fairy-${f.clientId}`, f)))
    ]
    const keep = new Set(want.map(r => r.id))
    const stale = editor.store.query.records('instance_presence').get().filter(r => !keep.has(r.id)).map(r => r.id)
    editor.store.mergeRemoteChanges(() => {
      if (stale.length > 0) editor.store.remove(stale)
      if (want.length > 0) editor.store.put(want)
    })
  }
  awareness.on('change', sync)
  sync()

  // The local person's presence.
  let timer: ReturnType<typeof setTimeout> | undefined
  let last = 0
  const publish = (): void => {
    timer = undefined
    last = Date.now()
    const vp = editor.getViewportPageBounds()
    const p = editor.inputs.getCurrentPagePoint()
    publishPresence(awareness, {
      user: { id: me.id, name: me.name, color },
      cursor: { x: p.x, y: p.y },
      selection: editor.getSelectedShapeIds().map(id => id.replace(/^shape:/, '')),
      viewport: { x: vp.x, y: vp.y, w: vp.w, h: vp.h }
    })
  }
  const schedule = (): void => {
    if (timer !== undefined) return
    const wait = Math.max(0, (opts.throttleMs ?? 50) - (Date.now() - last))
    timer = setTimeout(publish, wait)
  }
  const onEvent = (info: { name: string }): void => { if (info.name === 'pointer_move' || info.name === 'pointer_up') schedule() }
  editor.on('event', onEvent as never)
  const stopSelection = editor.store.listen(schedule, { source: 'user', scope: 'session' })
  publish()
  return {
    dispose: () => {
      clearTimeout(timer)
      awareness.off('change', sync)
      editor.off('event', onEvent as never)
      stopSelection()
    }
  }
}
