// One JSON call to a route of one room (`/rooms/{room}{path}`) with the page's token, shared by
// the fairy and history APIs: a refusal or a network failure becomes the API's own error, with
// the words its `describe` gives for the status and JSON body (status 0: no answer).

/** The words for a refusal: a code and a sentence to show. */
export type Describe = (status: number, body: unknown) => { code: string, message: string }

/** Makes an API's error from a status, a code and a sentence. */
export type Refusal = (status: number, code: string, message: string) => Error

/** Calls `/rooms/{room}{path}` and resolves with its JSON (null when empty or not JSON). */
export async function roomCall (
  fetchFn: typeof fetch, room: string, token: string | null, method: string, path: string,
  body: unknown, describe: Describe, refusal: Refusal
): Promise<unknown> {
  const headers: Record<string, string> = {}
  if (token !== null) headers.authorization = `Bearer ${token}`
  if (body !== undefined) headers['content-type'] = 'application/json'
  let res: Response
  try {
    res = await fetchFn(`/rooms/${encodeURIComponent(room)}${path}`, {
      method, headers, body: body !== undefined ? JSON.stringify(body) : undefined
    })
  } catch {
    const d = describe(0, null)
    throw refusal(0, d.code, d.message)
  }
  const text = await res.text().catch(() => '')
  let json: unknown = null
  try { json = text !== '' ? JSON.parse(text) : null } catch { /* not JSON */ }
  if (!res.ok) {
    const d = describe(res.status, json)
    throw refusal(res.status, d.code, d.message)
  }
  return json
}
