// The review routes as the page calls them (scope `write`): accept or reject one suggestion
// (`POST /rooms/{room}/suggestions/{id}/accept | reject`) and accept every pending suggestion of
// one fairy request (`POST …/fairies/{fid}/requests/{rid}/accept`); *Reject all* is the fairy
// API's revert of that request. Each call sends the page's current token and turns a refusal
// into a sentence (`SuggestApiError`); `describeSuggestionError` and the answer readers are pure.
// Answers are the server's own types, generated from its OpenAPI description (src/api.gen.ts).
import { ApiError, roomCall, type HttpOptions, type TokenGetter } from './call.js'
import { describeFairyError } from './fairies.js'
import type { components } from './api.gen.js'

type Schemas = components['schemas']

/** The answer to deciding one suggestion (`200`). */
export type Decided = Schemas['DecisionAnswer']
/** One suggestion of a request that could not be accepted (the server rejected it instead), and why. */
export type Conflict = Schemas['Conflict']
/** The answer to accepting a whole request (`200`). */
export type RequestAccepted = Schemas['RequestAcceptedAnswer']

/** Why a review call failed, with the words to show. */
export class SuggestApiError extends ApiError {}

/** The words for one suggestion the server would not apply (a code of `conflicts` or a 409). */
export function conflictWords (code: string): string {
  switch (code) {
    case 'shape_gone': return 'the shape it changes was deleted meanwhile'
    case 'shape_exists': return 'a shape with its id was made meanwhile'
    case 'already_decided': return 'someone already decided on it'
    case 'suggestion_not_found': return 'it is not known any more'
    default: return `the server refused it (${code})`
  }
}

/** What to tell the user about a failed review call, from the status and `{error, detail}` body. */
export function describeSuggestionError (status: number, body: unknown): { code: string, message: string } {
  const b = typeof body === 'object' && body !== null ? body as Record<string, unknown> : {}
  const code = typeof b.error === 'string' ? b.error : ''
  if (status === 403 && code === 'insufficient_scope') {
    return { code, message: 'Your token does not allow changing this canvas: it lacks the "write" scope, so suggestions cannot be accepted or rejected.' }
  }
  if (status === 404 && code === 'suggestion_not_found') return { code, message: 'That suggestion is not known any more.' }
  if (status === 409 && code === 'already_decided') return { code, message: 'Someone already decided on that suggestion.' }
  if (status === 409 && code === 'shape_gone') return { code, message: 'That suggestion changes a shape that was deleted meanwhile: it can only be rejected.' }
  if (status === 409 && code === 'shape_exists') return { code, message: 'A shape with that suggestion\'s id was made meanwhile: it can only be rejected.' }
  return describeFairyError(status, body)
}

/** Reads the answer to deciding one suggestion (`null` when it is not one). */
export function readDecided (answer: unknown): Decided | null {
  const a = typeof answer === 'object' && answer !== null ? answer as Record<string, unknown> : {}
  return (a.status === 'accepted' || a.status === 'rejected' || a.status === 'pending') && typeof a.seq === 'number' ? { status: a.status, seq: a.seq } : null
}

/** Reads the answer to accepting a request (`null` when it is not one; malformed conflicts are skipped). */
export function readRequestAccepted (answer: unknown): RequestAccepted | null {
  const a = typeof answer === 'object' && answer !== null ? answer as Record<string, unknown> : {}
  if (!Array.isArray(a.accepted) || !Array.isArray(a.conflicts) || typeof a.seq !== 'number') return null
  const conflicts: Conflict[] = []
  for (const c of a.conflicts as unknown[]) {
    const o = typeof c === 'object' && c !== null ? c as Record<string, unknown> : {}
    if (typeof o.id === 'string' && typeof o.error === 'string') conflicts.push({ id: o.id, error: o.error })
  }
  return { accepted: a.accepted.filter((x): x is string => typeof x === 'string'), conflicts, seq: a.seq }
}

/**
 * "1 suggestion could not be accepted and was rejected: the shape it changes was deleted
 * meanwhile" (`null` when none): the server rejects what an accept-all cannot apply.
 */
export function describeConflicts (conflicts: readonly Conflict[]): string | null {
  if (conflicts.length === 0) return null
  const why = [...new Set(conflicts.map(c => conflictWords(c.error)))].join('; ')
  const one = conflicts.length === 1
  return `${conflicts.length} suggestion${one ? '' : 's'} could not be accepted and ${one ? 'was' : 'were'} rejected: ${why}.`
}

/** Calls the review routes of one room with the page's token (read at each call: it may be renewed). */
export class SuggestApi {
  constructor (private readonly room: string, private readonly token: TokenGetter, private readonly fetchFn: typeof fetch = (i, o) => fetch(i, o), private readonly baseUrl = '') {}

  private get http (): HttpOptions { return { baseUrl: this.baseUrl, token: this.token, fetch: this.fetchFn } }

  private async call (path: string): Promise<unknown> {
    return await roomCall(this.http, this.room, 'POST', path, undefined, describeSuggestionError,
      (status, code, message) => new SuggestApiError(status, code, message))
  }

  /** Accepts (`accept`) or rejects (`reject`) one suggestion. */
  async decide (id: string, decision: 'accept' | 'reject'): Promise<Decided> {
    const answer = readDecided(await this.call(`/suggestions/${encodeURIComponent(id)}/${decision}`))
    if (answer === null) throw new SuggestApiError(500, 'bad_answer', 'The server did not say what became of the suggestion.')
    return answer
  }

  /** Accepts every pending suggestion of one fairy request. */
  async acceptRequest (fairyId: string, requestId: string): Promise<RequestAccepted> {
    const answer = readRequestAccepted(await this.call(`/fairies/${encodeURIComponent(fairyId)}/requests/${encodeURIComponent(requestId)}/accept`))
    if (answer === null) throw new SuggestApiError(500, 'bad_answer', 'The server did not say which suggestions it accepted.')
    return answer
  }
}
