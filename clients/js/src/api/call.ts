// One HTTP call to the server, shared by every API client of the package: the base URL (empty:
// the page's own origin), the current token (read at each call: it may have been renewed), the
// JSON or binary body, and the refusal turned into a typed `ApiError` carrying the status, the
// server's `{error, detail}` and the words a `Describe` gives for them (status 0: no answer).
// Owns only the transport; which routes exist is `client.ts`'s, what they mean the callers'.

/** The words for a refusal: a code and a sentence to show. */
export type Describe = (status: number, body: unknown) => { code: string, message: string }

/** Makes an API's error from a status, a code and a sentence. */
export type Refusal = (status: number, code: string, message: string) => Error

/** Where a client's token comes from: a value, or a function read before every call. */
export type TokenGetter = () => string | null | undefined | Promise<string | null | undefined>

/** How an API client reaches the server. */
export interface HttpOptions {
  /** `http(s)://host:port` of the server (a `ws(s)://` base is accepted); `''`: the page's origin. */
  baseUrl?: string
  /** The token sent as `Authorization: Bearer`; none when it gives `null`. */
  token?: TokenGetter
  /** The fetch to use (default: the global one). */
  fetch?: typeof fetch
}

/** A refused or failed call: the HTTP status (0 when no answer came), the server's error code and body. */
export class ApiError extends Error {
  constructor (readonly status: number, readonly code: string, message: string, readonly body: unknown = null) { super(message) }
}

/** The plain words for any refusal: the server's `{error, detail}` as they are. */
export function describeApiError (status: number, body: unknown): { code: string, message: string } {
  const b = typeof body === 'object' && body !== null ? body as Record<string, unknown> : {}
  const code = typeof b.error === 'string' ? b.error : ''
  const detail = typeof b.detail === 'string' ? b.detail : ''
  if (status === 0) return { code, message: 'Cannot reach the server.' }
  return { code, message: `The server refused (${status}${code !== '' ? ` ${code}` : ''})${detail !== '' ? `: ${detail}` : ''}.` }
}

/** `http(s)://…` for a base given as `http(s)://` or `ws(s)://` (trailing slashes dropped). */
export function httpBase (base: string): string {
  const b = base.replace(/\/+$/, '')
  if (b.startsWith('ws://')) return `http://${b.slice(5)}`
  if (b.startsWith('wss://')) return `https://${b.slice(6)}`
  return b
}

/** What one call sends. */
export interface CallInit {
  query?: Record<string, string | number | boolean | null | undefined>
  /** A JSON body (sent as `application/json`). */
  json?: unknown
  /** A raw body with its content type (a Yjs update, plain text). */
  raw?: { body: Uint8Array | string, type: string }
  /** What the answer is read as: JSON (default), bytes or text. */
  as?: 'json' | 'bytes' | 'text'
  describe?: Describe
  refusal?: Refusal
}

/** The URL of `path` (with `query`) on the server `base`. */
export function callUrl (base: string, path: string, query?: CallInit['query']): string {
  const q = new URLSearchParams()
  for (const [k, v] of Object.entries(query ?? {})) if (v !== null && v !== undefined) q.set(k, String(v))
  const qs = q.toString()
  return `${httpBase(base)}${path}${qs !== '' ? `?${qs}` : ''}`
}

/** Calls `path` and resolves with its answer (JSON: `null` when empty or not JSON). */
export async function httpCall (opts: HttpOptions, method: string, path: string, init: CallInit = {}): Promise<unknown> {
  const describe = init.describe ?? describeApiError
  const refusal = init.refusal ?? ((status: number, code: string, message: string) => new ApiError(status, code, message))
  const headers: Record<string, string> = {}
  const token = opts.token !== undefined ? await opts.token() : null
  if (typeof token === 'string' && token !== '') headers.authorization = `Bearer ${token}`
  let body: BodyInit | undefined
  if (init.json !== undefined) {
    headers['content-type'] = 'application/json'
    body = JSON.stringify(init.json)
  } else if (init.raw !== undefined) {
    headers['content-type'] = init.raw.type
    body = init.raw.body as BodyInit
  }
  const fetchFn = opts.fetch ?? ((i: RequestInfo | URL, o?: RequestInit) => fetch(i, o))
  let res: Response
  try {
    res = await fetchFn(callUrl(opts.baseUrl ?? '', path, init.query), { method, headers, body })
  } catch {
    const d = describe(0, null)
    throw refusal(0, d.code, d.message)
  }
  if (!res.ok) {
    const text = await res.text().catch(() => '')
    let json: unknown = null
    try { json = text !== '' ? JSON.parse(text) : null } catch { /* not JSON */ }
    const d = describe(res.status, json)
    const err = refusal(res.status, d.code, d.message)
    if (err instanceof ApiError && err.body === null) Object.assign(err, { body: json })
    throw err
  }
  if (init.as === 'bytes') return new Uint8Array(await res.arrayBuffer())
  const text = await res.text().catch(() => '')
  if (init.as === 'text') return text
  try { return text !== '' ? JSON.parse(text) : null } catch { return null }
}

/** Calls `/rooms/{room}{path}` (the fairy, review and history clients' shape of call). */
export async function roomCall (
  opts: HttpOptions, room: string, method: string, path: string,
  body: unknown, describe: Describe, refusal: Refusal
): Promise<unknown> {
  return await httpCall(opts, method, `/rooms/${encodeURIComponent(room)}${path}`, { json: body, describe, refusal })
}
