// URL parameters of the demo page: which room to join and under which name.
// Pure functions (no DOM), so they are unit-tested in Node.

/** The room used when the URL names none. */
export const DEFAULT_ROOM = 'demo'

const ROOM_RE = /^[A-Za-z0-9._-]{1,128}$/

/** What the page was asked to open. `room` is always valid for the server (docs/protocol.md). */
export interface PageParams {
  room: string
  /** `null` when the URL gives no usable name: the page then asks for one. */
  name: string | null
  /** `true` when `?room=` was present but not a valid room name (we fell back to the default). */
  roomWasInvalid: boolean
}

/** Whether the server accepts this room name (1–128 characters of `[A-Za-z0-9._-]`). */
export function isValidRoom (room: string): boolean {
  return ROOM_RE.test(room)
}

/** Trims a display name, drops control characters, caps it at 40 characters; `null` if empty. */
export function cleanName (raw: string | null | undefined): string | null {
  if (raw == null) return null
  // eslint-disable-next-line no-control-regex
  const name = raw.replace(/[\u0000-\u001f\u007f]/g, '').trim().slice(0, 40).trim()
  return name.length > 0 ? name : null
}

/** Reads `?room=` and `?name=` from a query string such as `location.search`. */
export function parseParams (search: string): PageParams {
  const q = new URLSearchParams(search)
  const rawRoom = q.get('room')
  const roomOk = rawRoom !== null && isValidRoom(rawRoom)
  return {
    room: roomOk ? rawRoom : DEFAULT_ROOM,
    name: cleanName(q.get('name')),
    roomWasInvalid: rawRoom !== null && !roomOk
  }
}
