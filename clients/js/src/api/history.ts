// The history routes as the page calls them: the timeline (`GET …/history`, page by page), a
// version (`GET …/versions/{seq}`), the room now (`GET …/doc`), restore and rollback. Each call
// sends the page's current token and turns a refusal into a sentence (`HistoryApiError`, words
// from `describeHistoryError`). Bodies and answers are the server's own types, generated from
// its OpenAPI description (src/api.gen.ts).
import { ApiError, roomCall, type HttpOptions, type TokenGetter } from './call.js'
import type { components } from './api.gen.js'
import { describeHistoryError, readHistoryPage, versionShapes, type HistoryPage } from './timeline.js'
import type { Shape } from '../schema/shapes.js'

/** Why a history call failed, with the words to show. */
export class HistoryApiError extends ApiError {}

/** Calls the history routes of one room with the page's token (read at each call: it may be renewed). */
export class HistoryApi {
  constructor (private readonly room: string, private readonly token: TokenGetter, private readonly fetchFn: typeof fetch = (i, o) => fetch(i, o), private readonly baseUrl = '') {}

  private get http (): HttpOptions { return { baseUrl: this.baseUrl, token: this.token, fetch: this.fetchFn } }

  private async call (method: string, path: string, body?: unknown): Promise<unknown> {
    return await roomCall(this.http, this.room, method, path, body, describeHistoryError,
      (status, code, message) => new HistoryApiError(status, code, message))
  }

  /** One page of the timeline: entries after `after` (from the start when `null`), oldest first. */
  async history (after: number | null, limit: number): Promise<HistoryPage> {
    const q = new URLSearchParams()
    if (after !== null) q.set('after', String(after))
    q.set('limit', String(limit))
    try {
      return readHistoryPage(await this.call('GET', `/history?${q.toString()}`))
    } catch (e) {
      // A room never written has no history yet: an empty timeline, not a refusal.
      if (e instanceof HistoryApiError && e.status === 404 && e.code === 'room_not_found') return { entries: [], next: null }
      throw e
    }
  }

  /** The room's shapes as they were just after update `seq`. */
  async version (seq: number): Promise<{ seq: number | null, shapes: Shape[] }> {
    return versionShapes(await this.call('GET', `/versions/${seq}`))
  }

  /** The room's shapes now, as the server has them. */
  async current (): Promise<{ seq: number | null, shapes: Shape[] }> {
    return versionShapes(await this.call('GET', '/doc'))
  }

  /** Makes the room's shapes and pages what they were after `seq` (one new update); its sequence number. */
  async restore (seq: number): Promise<number | null> {
    const body: components['schemas']['RestoreBody'] = { seq }
    const a = await this.call('POST', '/restore', body) as Partial<components['schemas']['SeqAnswer']> | null
    const s: unknown = typeof a === 'object' && a !== null ? a.seq : undefined
    return typeof s === 'number' ? s : null
  }

  /** Takes back everything `actor` did after `sinceSeq`, keeping others' later changes; the answer as sent. */
  async rollback (body: components['schemas']['RollbackBody']): Promise<unknown> {
    return await this.call('POST', '/rollback', body)
  }
}
