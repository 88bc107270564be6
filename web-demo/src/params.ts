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
  /** `true` when `?room=` was present but not a valid room name (`room` is then its slug). */
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

/** FNV-1a (32 bits) of a string's UTF-16 code units, as 8 hex digits: a stable short tag. */
function fnv1a (s: string): string {
  let h = 0x811c9dc5
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i)
    h = Math.imul(h, 0x01000193) >>> 0
  }
  return h.toString(16).padStart(8, '0')
}

/**
 * A valid room name for any asked-for name: the name itself when the server accepts it, else a
 * slug of it (accents dropped, every run of other characters one `-`, no `-` or `.` at either
 * end, at most 128 characters): `team alpha` → `team-alpha`, `café-☕` → `cafe`. A name with
 * nothing left (`☕☕`, or an empty `?room=`) becomes `room-` and 8 hex digits of its hash. The
 * same name always gives the same room, and it is never `demo` unless the name spells it.
 */
export function roomSlug (raw: string): string {
  if (isValidRoom(raw)) return raw
  const slug = raw
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .replace(/[^A-Za-z0-9._-]+/g, '-')
    .replace(/-{2,}/g, '-')
    .replace(/^[-.]+|[-.]+$/g, '')
    .slice(0, 128)
    .replace(/[-.]+$/, '')
  return slug !== '' ? slug : `room-${fnv1a(raw)}`
}

/** Reads `?room=` and `?name=` from a query string such as `location.search`. */
export function parseParams (search: string): PageParams {
  const q = new URLSearchParams(search)
  const rawRoom = q.get('room')
  const roomOk = rawRoom !== null && isValidRoom(rawRoom)
  return {
    room: rawRoom === null ? DEFAULT_ROOM : roomSlug(rawRoom),
    name: cleanName(q.get('name')),
    roomWasInvalid: rawRoom !== null && !roomOk
  }
}

/** The page's URL with `?room=` set to `room` (the rest kept): what `history.replaceState` shows. */
export function urlWithRoom (href: string, room: string): string {
  const u = new URL(href)
  u.searchParams.set('room', room)
  return u.toString()
}
