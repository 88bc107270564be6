// Connection status in words: what the status bar says for each provider state, close code and
// refusal. The server refuses a bad token with HTTP 401/403 before the upgrade (a browser only
// sees close code 1006 then, so the page asks the same URL over plain HTTP to learn why) and
// closes a session whose token expired with code 4401.

export type ConnState = 'connecting' | 'connected' | 'offline' | 'refused'

/** The close code the server uses when a token expires during a session. */
export const CLOSE_TOKEN_EXPIRED = 4401

/** What to tell the user about a refusal, from an HTTP status and the `{error, detail}` body. */
export function describeRefusal (status: number, body: unknown): string | null {
  if (status !== 401 && status !== 403) return null
  let detail = ''
  if (typeof body === 'object' && body !== null) {
    const b = body as Record<string, unknown>
    detail = [b.error, b.detail].filter((x): x is string => typeof x === 'string' && x !== '').join(': ')
  }
  const what = status === 401
    ? 'Your token was refused (missing, invalid or expired)'
    : 'Your token does not grant access to this room'
  return detail === '' ? `${what}.` : `${what}: ${detail}.`
}

/** What to tell the user when the server closed the socket with `code`/`reason`; `null`: transient. */
export function describeClose (code: number, reason: string): string | null {
  if (code === CLOSE_TOKEN_EXPIRED) return `Your session expired${reason !== '' ? ` (${reason})` : ''}. Get a new token to go on editing.`
  if (code >= 4400 && code < 4500) return `The server closed this room for you (${code}${reason !== '' ? `: ${reason}` : ''}).`
  if (code === 1009) return 'The server refused a message that was too large.'
  return null
}

/** The `http(s)://` URL of a room's WebSocket endpoint (to probe a refusal with `fetch`). */
export function probeUrl (origin: string, room: string, token: string | null): string {
  const u = new URL(`/rooms/${encodeURIComponent(room)}`, origin)
  if (token !== null) u.searchParams.set('token', token)
  return u.toString()
}

/** Failed attempts in a row (never opened) after which the status bar stops saying "reconnecting". */
export const STALLED_AFTER = 3

/**
 * Words for a connection that keeps failing before it opens, when no HTTP probe could say why
 * (a server may reject a plain GET before checking the token); `null` while it may be a blip.
 */
export function describeStalled (failures: number): string | null {
  if (failures < STALLED_AFTER) return null
  return `cannot connect after ${failures} tries: the server is down, or refuses this page's token`
}
