// Review mode in tldraw: a fairy's pending suggestions (the server-owned `suggestions` root,
// docs/document-schema.md "Suggestions") drawn as ghosts — local shape records that are never
// written to the document: ids `shape:fairyring-ghost:SUGGESTION`, put through
// `mergeRemoteChanges` (outside tldraw's undo and the binding's writes, which skip ghost ids),
// locked, faded. A create or an update shows the shape it proposes, a delete the shape it would
// remove, in red. Accepting and rejecting go through the HTTP API (the server applies or drops
// the record; the ghost leaves with it). Owns the ghosts only: shapes are `binding.ts`'s.
import * as Y from 'yjs'
import { ghosts, mergeProps, readSuggestions, shapeKeys, type Ghost, type Suggestion } from '@fairyring/client'
import type { Editor, JsonObject, TLPageId, TLRecord, TLShape, TLShapeId } from 'tldraw'
import { docToShape } from './records.js'

/** The id prefix of a ghost record (`shape:fairyring-ghost:` and the suggestion's id). */
export const GHOST_PREFIX = 'shape:fairyring-ghost:'

/** Whether a tldraw record id is a review ghost's (the binding never writes those). */
export const isGhostId = (id: string): boolean => id.startsWith(GHOST_PREFIX)

/** The ghost record id of a suggestion. */
export const ghostId = (suggestionId: string): TLShapeId => `${GHOST_PREFIX}${suggestionId}` as TLShapeId

/** What a ghost record carries in its `meta.fairyringGhost`. */
export interface GhostMeta {
  suggestion: string
  op: Ghost['op']
  fairyId: string
  requestId: string
  streaming: boolean
}

/** The decisions a review binding calls (`FairyringApi`'s methods of the same names). */
export interface ReviewApi {
  acceptSuggestion: (room: string, id: string) => Promise<unknown>
  rejectSuggestion: (room: string, id: string) => Promise<unknown>
}

/** What a review binding needs. */
export interface ReviewOptions {
  /** The room's name, for the decisions. */
  room: string
  /** The API client deciding (a `FairyringApi`). */
  api: ReviewApi
  /** A ghost's opacity (default 0.4). */
  opacity?: number
}

/** A running review binding. */
export interface ReviewBinding {
  /** The pending suggestions drawn now, oldest first. */
  pending: () => Ghost[]
  /** Accepts a suggestion (`POST …/suggestions/{id}/accept`): the server writes it to `shapes`. */
  accept: (suggestionId: string) => Promise<unknown>
  /** Rejects a suggestion (`POST …/suggestions/{id}/reject`): its ghost goes. */
  reject: (suggestionId: string) => Promise<unknown>
  /** Calls `fn` whenever the pending list changes; returns the unsubscribe. */
  onChange: (fn: (pending: Ghost[]) => void) => () => void
  dispose: () => void
}

/** The keys a suggestion proposes over the shape's keys now (`null` for nothing to draw). */
function proposedKeys (s: Suggestion, current: Record<string, unknown> | null): Record<string, unknown> | null {
  if (s.op === 'create') return { ...s.props }
  if (current === null) return null
  return s.op === 'update' ? mergeProps(current, s.props) : current
}

/**
 * Draws the room's pending suggestions in `editor` as ghosts and returns the binding that
 * accepts or rejects them. Reads `suggestions` and `shapes` of `doc` as untrusted input (the
 * client package's readers): a malformed record is skipped.
 */
export function bindReview (editor: Editor, doc: Y.Doc, opts: ReviewOptions): ReviewBinding {
  const suggestions = doc.getMap<unknown>('suggestions')
  const shapes = doc.getMap<unknown>('shapes')
  const opacity = opts.opacity ?? 0.4
  const listeners = new Set<(pending: Ghost[]) => void>()
  let pending: Ghost[] = []
  let drawn = new Set<TLShapeId>()

  const current = (shapeId: string): Record<string, unknown> | null => shapeKeys(shapes.get(shapeId))

  const sync = (): void => {
    const list = readSuggestions(suggestions)
    const next = ghosts(list, current)
    const byId = new Map(list.map(s => [s.id, s]))
    const pageIds = new Set<string>(editor.getPages().map(p => p.id))
    const fallback = editor.getCurrentPageId()
    const want: TLRecord[] = []
    for (const g of next) {
      const s = byId.get(g.id)
      const keys = s !== undefined ? proposedKeys(s, current(s.shapeId)) : null
      if (keys === null) continue
      const rec = docToShape(editor, `fairyring-ghost:${g.id}`, keys, pageIds, fallback as TLPageId)
      if (rec === null) continue
      const meta: GhostMeta = { suggestion: g.id, op: g.op, fairyId: g.fairyId, requestId: g.requestId, streaming: g.streaming }
      const props = g.op === 'delete' && 'color' in rec.props ? { ...rec.props, color: 'red' } : rec.props
      want.push({ ...rec, isLocked: true, opacity: g.op === 'delete' ? opacity / 2 : opacity, meta: { fairyringGhost: meta as unknown as JsonObject }, props } as TLShape)
    }
    const keep = new Set(want.map(r => r.id as TLShapeId))
    const stale = [...drawn].filter(id => !keep.has(id) && editor.store.get(id) !== undefined)
    if (want.length > 0 || stale.length > 0) {
      editor.store.mergeRemoteChanges(() => {
        if (stale.length > 0) editor.store.remove(stale)
        for (const r of want) {
          // A proposal tldraw's validators refuse (an odd value from the model) is left undrawn.
          try { editor.store.put([r]) } catch { keep.delete(r.id as TLShapeId) }
        }
      })
    }
    drawn = keep
    const changed = next.length !== pending.length || next.some((g, i) => g.id !== pending[i]?.id || g.streaming !== pending[i]?.streaming)
    // Listed even when not drawable (a type the binding does not carry): it can still be decided.
    pending = next
    if (changed) for (const l of listeners) l(pending)
  }

  const onSuggestions = (): void => { sync() }
  // A shape an update or a delete is about changed: its ghost follows (only while any is pending).
  const onShapes = (): void => { if (drawn.size > 0) sync() }
  suggestions.observeDeep(onSuggestions)
  shapes.observeDeep(onShapes)
  sync()

  return {
    pending: () => pending,
    accept: async id => await opts.api.acceptSuggestion(opts.room, id),
    reject: async id => await opts.api.rejectSuggestion(opts.room, id),
    onChange: fn => { listeners.add(fn); return () => { listeners.delete(fn) } },
    dispose: () => {
      suggestions.unobserveDeep(onSuggestions)
      shapes.unobserveDeep(onShapes)
      listeners.clear()
      const gone = [...drawn].filter(id => editor.store.get(id) !== undefined)
      if (gone.length > 0) editor.store.mergeRemoteChanges(() => { editor.store.remove(gone) })
      drawn = new Set()
    }
  }
}
