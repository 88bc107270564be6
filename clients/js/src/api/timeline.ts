// Reading the answers of the history routes (`GET /rooms/{room}/history`, `…/versions/{seq}`,
// `…/doc`) into typed records, defensively (an entry without sequence numbers or actor is
// skipped, never thrown on), and the words for a refused history call. Owns no network: the
// calls are `history.ts`'s; what a timeline shows is each client's.
import { MAIN_PAGE, readShapeJson, type Shape } from '../schema/shapes.js'
import { compareZ } from '../schema/zorder.js'

/**
 * Who wrote an update: a person (`user`, `id` = their token's sub), a fairy (`fairy`, with the
 * request it worked on and who prompted it) or the server on its own (`server`). A server action
 * on behalf of a person is the person's actor with `via` (`restore`, `rollback`, `api`).
 */
export interface Actor {
  kind: string
  id: string
  name: string | null
  requestId: string | null
  promptedBy: string | null
  model: string | null
  projectId: string | null
  taskId: string | null
  via: string | null
}

/** One history entry: updates `fromSeq..toSeq` by one actor, and the shapes they touched. */
export interface HistoryEntry {
  fromSeq: number
  toSeq: number
  /** When the first and the last of its updates were applied (ms since the epoch). */
  at: number
  until: number
  actor: Actor
  added: string[]
  updated: string[]
  removed: string[]
}

/** One page of `GET /rooms/{room}/history`: entries oldest first; `next` is the next page's `after`. */
export interface HistoryPage { entries: HistoryEntry[], next: number | null }

/** Most shape ids kept per list of one entry (the server's lists are trusted no further). */
const MAX_IDS = 10_000

function isObj (v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}
function seqOf (v: unknown): number | null {
  return typeof v === 'number' && Number.isInteger(v) && v >= 0 ? v : null
}
function optText (v: unknown, max = 200): string | null {
  return typeof v === 'string' && v !== '' ? v.slice(0, max) : null
}
function ids (v: unknown): string[] {
  if (!Array.isArray(v)) return []
  return v.filter((x): x is string => typeof x === 'string' && x !== '').slice(0, MAX_IDS)
}

/** Reads an actor; `null` when it has no kind or id. */
export function readActor (v: unknown): Actor | null {
  if (!isObj(v)) return null
  const kind = optText(v.kind, 20)
  const id = optText(v.id)
  if (kind === null || id === null) return null
  return {
    kind,
    id,
    name: optText(v.name, 60),
    requestId: optText(v.requestId, 100),
    promptedBy: optText(v.promptedBy),
    model: optText(v.model, 100),
    projectId: optText(v.projectId, 100),
    taskId: optText(v.taskId, 100),
    via: optText(v.via, 20)
  }
}

/** Reads one entry; `null` when its sequence numbers or actor are missing. */
export function readEntry (v: unknown): HistoryEntry | null {
  if (!isObj(v)) return null
  const fromSeq = seqOf(v.fromSeq)
  const toSeq = seqOf(v.toSeq) ?? fromSeq
  const actor = readActor(v.actor)
  if (fromSeq === null || toSeq === null || toSeq < fromSeq || actor === null) return null
  const at = typeof v.at === 'number' && Number.isFinite(v.at) ? v.at : 0
  const until = typeof v.until === 'number' && Number.isFinite(v.until) ? Math.max(at, v.until) : at
  const shapes = isObj(v.shapes) ? v.shapes : {}
  return { fromSeq, toSeq, at, until, actor, added: ids(shapes.added), updated: ids(shapes.updated), removed: ids(shapes.removed) }
}

/** Reads a history page; malformed entries are skipped, a malformed body is an empty last page. */
export function readHistoryPage (body: unknown): HistoryPage {
  if (!isObj(body)) return { entries: [], next: null }
  const entries = Array.isArray(body.entries) ? body.entries.flatMap(e => { const r = readEntry(e); return r === null ? [] : [r] }) : []
  entries.sort((a, b) => a.fromSeq - b.fromSeq)
  return { entries, next: seqOf(body.next) }
}

/** The shapes of a version (`GET …/versions/{seq}` or `…/doc`) on the main page, in z-order. */
export function versionShapes (body: unknown): { seq: number | null, shapes: Shape[] } {
  const b = isObj(body) ? body : {}
  const doc = isObj(b.doc) ? b.doc : {}
  const raw = isObj(doc.shapes) ? doc.shapes : {}
  const shapes: Shape[] = []
  for (const [id, v] of Object.entries(raw)) {
    const s = readShapeJson(id, v)
    if (s !== null && s.pageId === MAIN_PAGE) shapes.push(s)
  }
  return { seq: seqOf(b.seq), shapes: shapes.sort(compareZ) }
}

/** What to tell the user about a refused history call, from the status and `{error, detail}` body. */
export function describeHistoryError (status: number, body: unknown): { code: string, message: string } {
  const b = isObj(body) ? body : {}
  const code = typeof b.error === 'string' ? b.error : ''
  const detail = typeof b.detail === 'string' ? b.detail : typeof b.message === 'string' ? b.message : ''
  const message = (() => {
    if (status === 0) return 'Cannot reach the server.'
    if (status === 401) return 'Your token was refused (missing, invalid or expired): reload the page to get a new one.'
    if (status === 403 && code === 'insufficient_scope') {
      return `Your token does not allow this: it lacks the ${typeof b.scope === 'string' ? `"${b.scope}"` : 'needed'} scope.`
    }
    if (status === 403) return `Your token does not grant this room${detail !== '' ? ` (${detail})` : ''}.`
    if (status === 404) return `That version or room is not known${detail !== '' ? ` (${detail})` : ''}.`
    if (status === 410) return 'That version is no longer kept.'
    if (status === 503) return 'The server is busy or shutting down: try again in a moment.'
    return `The server refused (${status}${code !== '' ? ` ${code}` : ''})${detail !== '' ? `: ${detail}` : ''}.`
  })()
  return { code, message }
}
