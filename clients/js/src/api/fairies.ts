// The fairy HTTP API as the page calls it (scope `fairies`): invite, prompt, cancel, dismiss,
// the revert of one request, and the project routes (docs/fairies.md "Projects": the group
// prompt and disbanding a project). Each call sends the page's current token and turns a refusal
// into a sentence for the panel (`FairyApiError`); `describeFairyError` is pure and tested.
// Bodies and answers are the server's own types, generated from its OpenAPI description
// (src/api.gen.ts, `npm run api-types`): a changed handler fails this file's type check.
import { ApiError, roomCall, type HttpOptions, type TokenGetter } from './call.js'
import type { Box } from '../schema/geometry.js'
import type { components } from './api.gen.js'

type Schemas = components['schemas']

/** Why a fairy call failed, with the words to show. */
export class FairyApiError extends ApiError {}

/** The body of `POST …/prompt`: the message, the page's viewport and its selected shapes. */
export type PromptBody = Schemas['PromptBody']

/** Builds a prompt body; `null` when the message is blank. Bounds are rounded page coordinates. */
export function promptBody (message: string, viewport: Box, selection: readonly string[]): PromptBody | null {
  const text = message.trim()
  if (text === '') return null
  const r = (v: number): number => (Number.isFinite(v) ? Math.round(v) : 0)
  return {
    message: text,
    bounds: { x: r(viewport.x), y: r(viewport.y), w: Math.max(1, r(viewport.w)), h: Math.max(1, r(viewport.h)) },
    selectedShapeIds: selection.slice(0, 1000)
  }
}

/**
 * The body of `POST /rooms/{room}/group-prompt` (src/server/projects.rs): the message, the
 * fairies (`fairyIds`, the leader first) and the leader (`orchestratorId`), the viewport as
 * `bounds` and the selected shapes.
 */
export type GroupPromptBody = Schemas['GroupPromptBody']

/** What the server answers a group prompt with (`202`). */
export type GroupStarted = Schemas['ProjectStarted']

/**
 * Builds a group prompt body for the selected fairies (in selection order: the first selected
 * leads); the reason to show instead when the message is blank or fewer than two are selected.
 */
export function groupPromptBody (message: string, fairyIds: readonly string[], viewport: Box, selection: readonly string[]): GroupPromptBody | { refused: string } {
  const ids = [...new Set(fairyIds)]
  const leader = ids[0]
  if (leader === undefined || ids.length < 2) return { refused: 'Select two or more fairies (Shift+click) to give them a project.' }
  const base = promptBody(message, viewport, selection)
  if (base === null) return { refused: 'Type what the fairies should make together, then start the project.' }
  return { ...base, fairyIds: ids, orchestratorId: leader }
}

/** What to tell the user about a failed fairy call, from the status and `{error, detail}` body. */
export function describeFairyError (status: number, body: unknown): { code: string, message: string } {
  let code = ''
  let detail = ''
  if (typeof body === 'object' && body !== null) {
    const b = body as Record<string, unknown>
    if (typeof b.error === 'string') code = b.error
    if (typeof b.detail === 'string') detail = b.detail
  }
  const message = (() => {
    if (status === 403 && code === 'insufficient_scope') {
      return 'Your token does not allow working with fairies: it lacks the "fairies" scope. Ask for a token with that scope to invite and talk to fairies.'
    }
    if (status === 403) return `Your token does not grant fairies in this room${detail !== '' ? ` (${detail})` : ''}.`
    if (status === 401) return 'Your token was refused (missing, invalid or expired): reload the page to get a new one.'
    if (code === 'fairy_not_found') return 'That fairy is no longer in this room.'
    if (code === 'request_not_found') return 'That request is not known any more.'
    if (code === 'fairy_in_project') {
      return `A fairy you chose is busy in a live project: wait until it ends or disband it first${detail !== '' ? ` (${detail})` : ''}.`
    }
    if (code === 'project_not_found') return 'That project is not known any more.'
    if (code === 'invalid_group_prompt') return `The group prompt was refused${detail !== '' ? `: ${detail}` : ''}.`
    if (status === 503) return 'The server is shutting down: try again in a moment.'
    if (status === 0) return 'Cannot reach the server.'
    return `The server refused (${status}${code !== '' ? ` ${code}` : ''})${detail !== '' ? `: ${detail}` : ''}.`
  })()
  return { code, message }
}

/** Calls the fairy routes of one room with the page's token (read at each call: it may be renewed). */
export class FairyApi {
  constructor (private readonly room: string, private readonly token: TokenGetter, private readonly fetchFn: typeof fetch = (i, o) => fetch(i, o), private readonly baseUrl = '') {}

  private get http (): HttpOptions { return { baseUrl: this.baseUrl, token: this.token, fetch: this.fetchFn } }

  /** Calls `/rooms/{room}{path}`. */
  private async call (method: string, path: string, body?: unknown): Promise<unknown> {
    return await roomCall(this.http, this.room, method, path, body, describeFairyError,
      (status, code, message) => new FairyApiError(status, code, message))
  }

  /**
   * Invites a fairy (`name` optional; `apply`: its default, sent when it is `suggest`;
   * `position`: where its sprite first appears, page coordinates); resolves with its id.
   */
  async invite (name: string, apply: Schemas['ApplyMode'] = 'direct', position?: { x: number, y: number }): Promise<string> {
    const trimmed = name.trim()
    const body: Schemas['InviteBody'] = trimmed !== '' ? { name: trimmed } : {}
    if (apply === 'suggest') body.apply = apply
    if (position !== undefined && Number.isFinite(position.x) && Number.isFinite(position.y)) {
      body.position = { x: Math.round(position.x), y: Math.round(position.y) }
    }
    const answer = await this.call('POST', '/fairies', body) as Partial<Schemas['FairyView']> | null
    const id: unknown = typeof answer === 'object' && answer !== null ? answer.id : undefined
    if (typeof id !== 'string') throw new FairyApiError(500, 'bad_answer', 'The server did not say which fairy it invited.')
    return id
  }

  /** Prompts a fairy; resolves with the request it started. */
  async prompt (id: string, body: PromptBody): Promise<Schemas['RequestId'] | null> {
    const answer = await this.call('POST', `/fairies/${encodeURIComponent(id)}/prompt`, body) as Partial<Schemas['PromptAccepted']> | null
    const requestId: unknown = typeof answer === 'object' && answer !== null ? answer.requestId : undefined
    return typeof requestId === 'string' ? requestId : null
  }

  async cancel (id: string): Promise<void> {
    await this.call('POST', `/fairies/${encodeURIComponent(id)}/cancel`)
  }

  async dismiss (id: string): Promise<void> {
    await this.call('DELETE', `/fairies/${encodeURIComponent(id)}`)
  }

  /** Changes the fairy's default way of applying its canvas actions (its entity's `apply`). */
  async setApply (id: string, apply: Schemas['ApplyMode']): Promise<void> {
    const body: Schemas['UpdateBody'] = { apply }
    await this.call('PATCH', `/fairies/${encodeURIComponent(id)}`, body)
  }

  /** Takes back what the fairy changed during request `requestId` (in review mode: rejects what it suggested that waits). */
  async revert (id: string, requestId: string): Promise<Schemas['RevertAnswer'] | null> {
    const answer = await this.call('POST', `/fairies/${encodeURIComponent(id)}/requests/${encodeURIComponent(requestId)}/revert`) as Partial<Schemas['RevertAnswer']> | null
    const a = typeof answer === 'object' && answer !== null ? answer : {}
    if (typeof a.reverted !== 'number' || typeof a.kept !== 'number') return null
    const rejected = Array.isArray(a.rejectedSuggestions) ? a.rejectedSuggestions.filter((x): x is string => typeof x === 'string') : []
    return rejected.length > 0 ? { reverted: a.reverted, kept: a.kept, rejectedSuggestions: rejected } : { reverted: a.reverted, kept: a.kept }
  }

  /** Starts a project: the fairies of `body.fairyIds` work together on the message. */
  async groupPrompt (body: GroupPromptBody): Promise<GroupStarted> {
    const answer = await this.call('POST', '/group-prompt', body) as Partial<GroupStarted> | null
    const a = typeof answer === 'object' && answer !== null ? answer : {}
    if (typeof a.projectId !== 'string' || typeof a.orchestratorId !== 'string' || typeof a.mode !== 'string') {
      throw new FairyApiError(500, 'bad_answer', 'The server did not say which project it started.')
    }
    return { projectId: a.projectId, orchestratorId: a.orchestratorId, mode: a.mode }
  }

  /** Disbands a project: it is aborted and its members stop at once. */
  async disband (projectId: string): Promise<void> {
    await this.call('DELETE', `/projects/${encodeURIComponent(projectId)}`)
  }
}
