// The whole HTTP API of a fairyring server as typed methods, one per operation of its OpenAPI
// description (`/openapi.json`, committed as clients/js/openapi.json and turned into
// `api.gen.ts` by openapi-typescript): bodies, queries and answers are the generated types, and
// `OPERATIONS` names the method of every `operationId` — a route added to the server without a
// method here fails this package's type check. Refusals throw `ApiError` (status, the server's
// error code, its body). Tokens are read from a getter before each call, so a renewed token is
// used at once. Owns the route table; the words for refusals and the answer readers of the
// demo's panels are in `fairies.ts`, `review.ts`, `history.ts`.
import type { components, operations } from './api.gen.js'
import { ApiError, callUrl, httpBase, httpCall, type CallInit, type HttpOptions } from './call.js'
import { RoomConnection, type RoomConnectionOptions } from '../room/connection.js'
import type { ShapeChanges, ShapeInput } from '../schema/write.js'

type Ops = operations
type Schemas = components['schemas']
type JsonOf<T> = T extends { content: { 'application/json': infer B } } ? B : never
/** The JSON body an operation takes. */
export type BodyOf<K extends keyof Ops> = Ops[K] extends { requestBody?: infer R } ? JsonOf<NonNullable<R>> : never
/** The JSON answer of an operation for status `C`. */
export type AnswerOf<K extends keyof Ops, C extends number> = Ops[K]['responses'] extends { [P in C]: infer R } ? JsonOf<R> : never
/** The query of an operation. */
export type QueryOf<K extends keyof Ops> = Ops[K] extends { parameters: { query?: infer Q } } ? NonNullable<Q> : never

/** Every operation of `/openapi.json` and the method of `FairyringApi` that calls it. */
export const OPERATIONS = {
  joinRoom: 'joinRoom',
  health: 'health',
  openapi: 'openapi',
  metrics: 'metrics',
  devToken: 'devToken',
  groupPrompt: 'groupPrompt',
  disbandProject: 'disbandProject',
  exportSvg: 'exportSvg',
  exportPng: 'exportPng',
  exportJpg: 'exportJpg',
  roomHistory: 'roomHistory',
  roomDoc: 'roomDoc',
  versionAt: 'versionAt',
  version: 'version',
  restore: 'restore',
  rollback: 'rollback',
  applyUpdate: 'applyUpdate',
  patchShapes: 'patchShapes',
  acceptSuggestion: 'acceptSuggestion',
  rejectSuggestion: 'rejectSuggestion',
  acceptRequest: 'acceptRequest',
  readInstructions: 'readInstructions',
  writeInstructions: 'writeInstructions',
  listFairies: 'listFairies',
  inviteFairy: 'inviteFairy',
  dismissFairy: 'dismissFairy',
  updateFairy: 'updateFairy',
  promptFairy: 'promptFairy',
  cancelFairy: 'cancelFairy',
  fairyHistory: 'fairyHistory',
  fairyEvents: 'fairyEvents',
  revertRequest: 'revertRequest',
  roomUsage: 'roomUsage'
} as const satisfies { [K in keyof Ops]: keyof FairyringApi }

/** One item of a shape patch's `update`: the shape's id and the keys to set. */
export type ShapeUpdate = ShapeChanges & { id: string }
/** The body of `PATCH /rooms/{room}/shapes`, in the document schema's JSON form. */
export interface ShapePatchBody { create?: ShapeInput[], update?: ShapeUpdate[], delete?: string[] }
/** A room as JSON: every root of the document schema under `doc` (`doc.shapes.ID.x`). */
export type DocJson = Omit<Schemas['DocAnswer'], 'doc'> & { doc: Record<string, Record<string, unknown>> }

/** The area of an export (`x, y, w, h`: all four or none), its page and scale. */
export type ExportQuery = QueryOf<'exportSvg'>

/** One event of a fairy's event stream (`GET …/fairies/{id}/events`, server-sent events). */
export interface FairyEvent { event: string, data: unknown, id: string | null }

const r = (room: string): string => `/rooms/${encodeURIComponent(room)}`
const seg = (s: string): string => encodeURIComponent(s)

/** A client of one fairyring server. */
export class FairyringApi {
  constructor (readonly options: HttpOptions = {}) {}

  private async call (method: string, path: string, init: CallInit = {}): Promise<unknown> {
    return await httpCall(this.options, method, path, init)
  }

  /** The server's base as `http(s)://…` (`''`: the page's origin). */
  get baseUrl (): string { return httpBase(this.options.baseUrl ?? '') }

  // ---- rooms over WebSocket ----

  /** `GET /rooms/{room}` (upgrade): opens the room over y-websocket with this client's token. */
  joinRoom (room: string, opts: Partial<RoomConnectionOptions> = {}): RoomConnection {
    const base = this.baseUrl !== '' ? this.baseUrl : (typeof location !== 'undefined' ? location.origin : '')
    const token = this.options.token
    return new RoomConnection({
      server: base,
      room,
      ...(token !== undefined ? { token: async () => (await token()) ?? null } : {}),
      ...opts
    })
  }

  // ---- the server ----

  /** `GET /healthz`. */
  async health (): Promise<Schemas['Health']> {
    return await this.call('GET', '/healthz') as Schemas['Health']
  }

  /** `GET /openapi.json`: the server's own description. */
  async openapi (): Promise<Record<string, unknown>> {
    return await this.call('GET', '/openapi.json') as Record<string, unknown>
  }

  /** `GET /metrics` (OpenMetrics text). */
  async metrics (): Promise<string> {
    return await this.call('GET', '/metrics', { as: 'text' }) as string
  }

  /** `POST /auth/dev-token` (servers in `--dev` only). */
  async devToken (body: BodyOf<'devToken'>): Promise<Schemas['DevToken']> {
    return await this.call('POST', '/auth/dev-token', { json: body }) as Schemas['DevToken']
  }

  // ---- fairies ----

  /** `GET /rooms/{room}/fairies`. */
  async listFairies (room: string): Promise<Schemas['FairyList']> {
    return await this.call('GET', `${r(room)}/fairies`) as Schemas['FairyList']
  }

  /** `POST /rooms/{room}/fairies`: invites a fairy (`201`). */
  async inviteFairy (room: string, body: BodyOf<'inviteFairy'> = {}): Promise<Schemas['FairyView']> {
    return await this.call('POST', `${r(room)}/fairies`, { json: body }) as Schemas['FairyView']
  }

  /** `DELETE /rooms/{room}/fairies/{id}`: dismisses a fairy. */
  async dismissFairy (room: string, id: string): Promise<void> {
    await this.call('DELETE', `${r(room)}/fairies/${seg(id)}`)
  }

  /** `PATCH /rooms/{room}/fairies/{id}`: changes its apply mode (`direct` / `suggest`). */
  async updateFairy (room: string, id: string, body: BodyOf<'updateFairy'>): Promise<Schemas['FairyView']> {
    return await this.call('PATCH', `${r(room)}/fairies/${seg(id)}`, { json: body }) as Schemas['FairyView']
  }

  /** `POST /rooms/{room}/fairies/{id}/prompt` (`202`: the request it started). */
  async promptFairy (room: string, id: string, body: BodyOf<'promptFairy'>): Promise<Schemas['PromptAccepted']> {
    return await this.call('POST', `${r(room)}/fairies/${seg(id)}/prompt`, { json: body }) as Schemas['PromptAccepted']
  }

  /** `POST /rooms/{room}/fairies/{id}/cancel`: stops what it is doing. */
  async cancelFairy (room: string, id: string, body: BodyOf<'cancelFairy'> = {}): Promise<Schemas['Cancelling']> {
    return await this.call('POST', `${r(room)}/fairies/${seg(id)}/cancel`, { json: body }) as Schemas['Cancelling']
  }

  /** `GET /rooms/{room}/fairies/{id}/history`: its requests. */
  async fairyHistory (room: string, id: string): Promise<Schemas['FairyHistory']> {
    return await this.call('GET', `${r(room)}/fairies/${seg(id)}/history`) as Schemas['FairyHistory']
  }

  /** `POST /rooms/{room}/fairies/{id}/requests/{request}/revert`: takes back a request. */
  async revertRequest (room: string, id: string, request: string): Promise<Schemas['RevertAnswer']> {
    return await this.call('POST', `${r(room)}/fairies/${seg(id)}/requests/${seg(request)}/revert`) as Schemas['RevertAnswer']
  }

  /** `POST /rooms/{room}/fairies/{id}/requests/{request}/accept`: accepts every pending suggestion of a request. */
  async acceptRequest (room: string, id: string, request: string): Promise<Schemas['RequestAcceptedAnswer']> {
    return await this.call('POST', `${r(room)}/fairies/${seg(id)}/requests/${seg(request)}/accept`) as Schemas['RequestAcceptedAnswer']
  }

  /**
   * `GET /rooms/{room}/fairies/{id}/events`: the fairy's events as they happen (server-sent
   * events), until the stream ends or `signal` aborts.
   */
  async * fairyEvents (room: string, id: string, signal?: AbortSignal): AsyncGenerator<FairyEvent> {
    const headers: Record<string, string> = { accept: 'text/event-stream' }
    const token = this.options.token !== undefined ? await this.options.token() : null
    if (typeof token === 'string' && token !== '') headers.authorization = `Bearer ${token}`
    const fetchFn = this.options.fetch ?? ((i: RequestInfo | URL, o?: RequestInit) => fetch(i, o))
    const res = await fetchFn(callUrl(this.baseUrl, `${r(room)}/fairies/${seg(id)}/events`), { headers, ...(signal !== undefined ? { signal } : {}) })
    if (!res.ok || res.body === null) {
      const body: unknown = await res.json().catch(() => null)
      const b = typeof body === 'object' && body !== null ? body as Record<string, unknown> : {}
      throw new ApiError(res.status, typeof b.error === 'string' ? b.error : '', `The server refused the event stream (${res.status}).`, body)
    }
    yield * readEventStream(res.body)
  }

  /** `POST /rooms/{room}/group-prompt`: starts a project of several fairies (`202`). */
  async groupPrompt (room: string, body: BodyOf<'groupPrompt'>): Promise<Schemas['ProjectStarted']> {
    return await this.call('POST', `${r(room)}/group-prompt`, { json: body }) as Schemas['ProjectStarted']
  }

  /** `DELETE /rooms/{room}/projects/{project}`: disbands a project. */
  async disbandProject (room: string, project: string): Promise<void> {
    await this.call('DELETE', `${r(room)}/projects/${seg(project)}`)
  }

  /** `GET /rooms/{room}/instructions`: the room's standing instructions to its fairies. */
  async readInstructions (room: string): Promise<string> {
    return await this.call('GET', `${r(room)}/instructions`, { as: 'text' }) as string
  }

  /** `PUT /rooms/{room}/instructions`. */
  async writeInstructions (room: string, text: string): Promise<void> {
    await this.call('PUT', `${r(room)}/instructions`, { raw: { body: text, type: 'text/plain; charset=utf-8' } })
  }

  /** `GET /rooms/{room}/usage`: the fairies' model tokens and cost per fairy, person and project
   * over the last hour and day, the asker's own share and the budgets (on the node that answers). */
  async roomUsage (room: string): Promise<Schemas['UsageAnswer']> {
    return await this.call('GET', `${r(room)}/usage`) as Schemas['UsageAnswer']
  }

  // ---- review ----

  /** `POST /rooms/{room}/suggestions/{id}/accept`. */
  async acceptSuggestion (room: string, id: string): Promise<Schemas['DecisionAnswer']> {
    return await this.call('POST', `${r(room)}/suggestions/${seg(id)}/accept`) as Schemas['DecisionAnswer']
  }

  /** `POST /rooms/{room}/suggestions/{id}/reject`. */
  async rejectSuggestion (room: string, id: string): Promise<Schemas['DecisionAnswer']> {
    return await this.call('POST', `${r(room)}/suggestions/${seg(id)}/reject`) as Schemas['DecisionAnswer']
  }

  // ---- history ----

  /** `GET /rooms/{room}/history`: one page of the timeline (entries after `after`). */
  async roomHistory (room: string, query: QueryOf<'roomHistory'> = {}): Promise<Schemas['HistoryPage']> {
    return await this.call('GET', `${r(room)}/history`, { query }) as Schemas['HistoryPage']
  }

  /** `GET /rooms/{room}/doc`: every root as JSON. */
  async roomDoc (room: string): Promise<DocJson> {
    return await this.call('GET', `${r(room)}/doc`) as DocJson
  }

  /** `GET /rooms/{room}/doc?format=yjs`: the room now as one Yjs update. */
  async roomDocUpdate (room: string): Promise<Uint8Array> {
    return await this.call('GET', `${r(room)}/doc`, { query: { format: 'yjs' }, as: 'bytes' }) as Uint8Array
  }

  /** `GET /rooms/{room}/versions?at=MS`: the last update at or before a time. */
  async versionAt (room: string, at: number): Promise<Schemas['SeqAnswer']> {
    return await this.call('GET', `${r(room)}/versions`, { query: { at } }) as Schemas['SeqAnswer']
  }

  /** `GET /rooms/{room}/versions/{seq}`: the room just after update `seq`, as JSON. */
  async version (room: string, seq: number): Promise<DocJson> {
    return await this.call('GET', `${r(room)}/versions/${seq}`) as DocJson
  }

  /** `GET /rooms/{room}/versions/{seq}?format=yjs|svg|png`: a version as a Yjs update or an image. */
  async versionBytes (room: string, seq: number, format: 'yjs' | 'svg' | 'png', area: ExportQuery = {}): Promise<Uint8Array> {
    return await this.call('GET', `${r(room)}/versions/${seq}`, { query: { ...area, format }, as: 'bytes' }) as Uint8Array
  }

  /** `POST /rooms/{room}/restore`: makes the shapes and pages what they were after `seq`. */
  async restore (room: string, body: BodyOf<'restore'>): Promise<Schemas['SeqAnswer']> {
    return await this.call('POST', `${r(room)}/restore`, { json: body }) as Schemas['SeqAnswer']
  }

  /** `POST /rooms/{room}/rollback`: takes back what one actor did since `sinceSeq`. */
  async rollback (room: string, body: BodyOf<'rollback'>): Promise<Schemas['RollbackAnswer']> {
    return await this.call('POST', `${r(room)}/rollback`, { json: body }) as Schemas['RollbackAnswer']
  }

  // ---- REST writes ----

  /** `POST /rooms/{room}/update`: applies one Yjs v1 update, vetted as a peer's. */
  async applyUpdate (room: string, update: Uint8Array): Promise<Schemas['SeqAnswer']> {
    return await this.call('POST', `${r(room)}/update`, { raw: { body: update, type: 'application/octet-stream' } }) as Schemas['SeqAnswer']
  }

  /** `PATCH /rooms/{room}/shapes`: creates, updates and deletes shapes in one transaction. */
  async patchShapes (room: string, body: ShapePatchBody): Promise<Schemas['PatchAnswer']> {
    return await this.call('PATCH', `${r(room)}/shapes`, { json: body }) as Schemas['PatchAnswer']
  }

  // ---- exports ----

  /** `GET /rooms/{room}/export.svg`. */
  async exportSvg (room: string, query: ExportQuery = {}): Promise<string> {
    return await this.call('GET', `${r(room)}/export.svg`, { query, as: 'text' }) as string
  }

  /** `GET /rooms/{room}/export.png`. */
  async exportPng (room: string, query: ExportQuery = {}): Promise<Uint8Array> {
    return await this.call('GET', `${r(room)}/export.png`, { query, as: 'bytes' }) as Uint8Array
  }

  /** `GET /rooms/{room}/export.jpg`. */
  async exportJpg (room: string, query: ExportQuery = {}): Promise<Uint8Array> {
    return await this.call('GET', `${r(room)}/export.jpg`, { query, as: 'bytes' }) as Uint8Array
  }
}

/** Reads a server-sent event stream into events (`data` parsed as JSON when it is JSON). */
export async function * readEventStream (body: ReadableStream<Uint8Array>): AsyncGenerator<FairyEvent> {
  const reader = body.getReader()
  const decoder = new TextDecoder()
  let buf = ''
  try {
    for (;;) {
      const { done, value } = await reader.read()
      if (done) break
      buf += decoder.decode(value, { stream: true })
      let cut: number
      while ((cut = buf.search(/\r?\n\r?\n/)) >= 0) {
        const block = buf.slice(0, cut)
        buf = buf.slice(cut).replace(/^\r?\n\r?\n/, '')
        const ev = parseEvent(block)
        if (ev !== null) yield ev
      }
    }
  } finally {
    reader.releaseLock()
  }
}

/** One block of an event stream; `null` for a comment-only block. */
export function parseEvent (block: string): FairyEvent | null {
  let event = 'message'
  let id: string | null = null
  const data: string[] = []
  for (const line of block.split(/\r?\n/)) {
    if (line === '' || line.startsWith(':')) continue
    const colon = line.indexOf(':')
    const field = colon < 0 ? line : line.slice(0, colon)
    const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '')
    if (field === 'event') event = value
    else if (field === 'data') data.push(value)
    else if (field === 'id') id = value
  }
  if (data.length === 0 && event === 'message') return null
  const text = data.join('\n')
  let parsed: unknown = text
  try { parsed = JSON.parse(text) } catch { /* plain text */ }
  return { event, data: parsed, id }
}
