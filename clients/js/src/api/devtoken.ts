// Getting a token: `POST /auth/dev-token` exists only when the server runs with `--dev`.
// A 404 means "no dev mode": the page then connects without a token (an open server) or with
// one given in `?token=`.
import { httpBase } from './call.js'

/** The dev-token response (`{token, sub, name, expires_at}`). */
export interface DevToken { token: string, sub: string, name: string, expiresAt: number | null }

/** Why getting a token failed, in words for the status bar. */
export class TokenError extends Error {}

/** Parses the JSON answer of `/auth/dev-token`; throws `TokenError` on a malformed body. */
export function parseDevToken (body: unknown): DevToken {
  if (typeof body !== 'object' || body === null) throw new TokenError('dev-token answer is not a JSON object')
  const b = body as Record<string, unknown>
  if (typeof b.token !== 'string' || b.token === '') throw new TokenError('dev-token answer has no token')
  const expires = b.expires_at
  return {
    token: b.token,
    sub: typeof b.sub === 'string' && b.sub !== '' ? b.sub : 'anonymous',
    name: typeof b.name === 'string' ? b.name : '',
    expiresAt: typeof expires === 'number' && Number.isFinite(expires) ? expires : null
  }
}

/** Asks the server for a dev token; `null` when the server has no dev mode (404). */
export async function fetchDevToken (name: string, fetchFn: typeof fetch = (i, o) => fetch(i, o), baseUrl = ''): Promise<DevToken | null> {
  let res: Response
  try {
    res = await fetchFn(`${httpBase(baseUrl)}/auth/dev-token`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name })
    })
  } catch (e) {
    throw new TokenError(`cannot reach the server for a token: ${String(e)}`)
  }
  if (res.status === 404) return null
  if (!res.ok) throw new TokenError(`the server refused a dev token (HTTP ${res.status})`)
  let body: unknown
  try {
    body = await res.json()
  } catch {
    throw new TokenError('dev-token answer is not JSON')
  }
  return parseDevToken(body)
}
