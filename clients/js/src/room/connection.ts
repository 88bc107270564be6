// A room connection over the official `yjs` + `y-websocket` (docs/protocol.md): the token comes
// from a callback and is renewed before it expires (the server closes a session whose token
// expired with 4401: the connection then asks for a new one and reconnects), a refusal before
// the upgrade is asked over HTTP for its reason, and the server's close codes reach the caller
// as typed events. Owns the socket's life; what the document holds is the schema modules'.
import * as Y from 'yjs'
import { WebsocketProvider } from 'y-websocket'
import * as authProtocol from 'y-protocols/auth'
import type * as decoding from 'lib0/decoding'
import type { Awareness } from 'y-protocols/awareness'
import { httpBase } from '../api/call.js'

/** What the server's close codes mean for a client (docs/protocol.md "Limits and close codes"). */
export const CLOSE_CODES = {
  /** The server is shutting down or the room was closed: reconnect. */
  goingAway: 1001,
  /** A malformed message or an update the server refuses. */
  invalid: 1007,
  /** The rate limit was exceeded, or an update wrote under a server-owned root. */
  policy: 1008,
  /** A message, awareness state or the document would be too large. */
  tooLarge: 1009,
  /** The store failed. */
  serverError: 1011,
  /** The peer read too slowly, the room was full, or the room reloads: reconnect and resync. */
  tryAgain: 1013,
  /** The token expired. */
  tokenExpired: 4401
} as const

/** The kind of a server close, by code. */
export type CloseKind = 'token-expired' | 'policy' | 'too-large' | 'try-again' | 'going-away' | 'invalid' | 'server-error' | 'other'

/** A close of the socket by the server. */
export interface RoomClose { code: number, reason: string, kind: CloseKind }

/** The kind of a close code. */
export function closeKind (code: number): CloseKind {
  switch (code) {
    case CLOSE_CODES.tokenExpired: return 'token-expired'
    case CLOSE_CODES.policy: return 'policy'
    case CLOSE_CODES.tooLarge: return 'too-large'
    case CLOSE_CODES.tryAgain: return 'try-again'
    case CLOSE_CODES.goingAway: return 'going-away'
    case CLOSE_CODES.invalid: return 'invalid'
    case CLOSE_CODES.serverError: return 'server-error'
    default: return 'other'
  }
}

/**
 * Whether the connection reconnects by itself after a close: a server going away, a slow read
 * or a full room (1013) and transient failures do; a refused update (1007), a policy (1008) or
 * size (1009) close would repeat the same refusal, so they stop until `connect()`. 4401 is
 * handled by renewing the token.
 */
export function reconnectsAfter (code: number): boolean {
  return !(code === 1007 || code === 1008 || code === 1009 || (code >= 4400 && code < 4500))
}

/**
 * A token and when it expires (Unix seconds): read from the JWT's `exp` when left out; `null`
 * says it is unknown (no renewal is scheduled: a 4401 asks for the next one).
 */
export interface TokenGrant { token: string, expiresAt?: number | null }

/** Where tokens come from: called at start, before expiry and after a 4401 (`null`: connect without one). */
export type TokenSource = () => Promise<TokenGrant | string | null> | TokenGrant | string | null

/** A refusal before the upgrade (`{error, detail}` of the HTTP answer). */
export interface RoomRefusal { status: number, error: string, detail: string }

/** The events a `RoomConnection` emits. */
export interface RoomEvents {
  status: (status: 'connecting' | 'connected' | 'disconnected') => void
  synced: (synced: boolean) => void
  /** Every close the server made with a code. */
  close: (close: RoomClose) => void
  /** 4401: the token expired (the connection renews it and reconnects). */
  'token-expired': (close: RoomClose) => void
  /** 1008: rate limit, or a write under a server-owned root (no reconnect). */
  'policy-violation': (close: RoomClose) => void
  /** 1009: a message or the document too large (no reconnect). */
  'too-large': (close: RoomClose) => void
  /** 1013: try again later (the connection reconnects). */
  'try-again': (close: RoomClose) => void
  /** An attempt failed before the socket opened (`failures`: attempts in a row). */
  'connect-failed': (failures: number) => void
  /** The server refused the connection before the upgrade (401, 403, 400, 503). */
  refused: (refusal: RoomRefusal) => void
  /** A read-only peer's update was dropped (y-protocols auth message). */
  'permission-denied': (reason: string) => void
  /** A new token is in use. */
  token: (grant: TokenGrant) => void
  /** The token source failed. */
  error: (error: Error) => void
}

/** How to open a room. */
export interface RoomConnectionOptions {
  /** The server: `ws(s)://host:port` or `http(s)://host:port` (the `/rooms` path is added). */
  server: string
  room: string
  doc?: Y.Doc
  token?: TokenSource
  /** Renew the token this long before it expires (default 60 s; at most half of what is left of it). */
  refreshMarginMs?: number
  /** A WebSocket class for environments without a global one (Node 20: the `ws` package). */
  WebSocket?: unknown
  /** Connect at once (default true). */
  connect?: boolean
  /** The fetch used to ask a refusal's reason (default: the global one). */
  fetch?: typeof fetch
  /**
   * Ask the token source for a new token before every reconnect (default false: the provider
   * reconnects with the token it has). For a free token such as `--dev`'s: a restarted server
   * (a new signing secret) is met with a token it signed, no WebSocket is opened while the token
   * source cannot be reached (a server that is down), and no stale token is ever sent.
   */
  renewOnReconnect?: boolean
}

/** The `exp` claim of a JWT (Unix seconds), or `null` when it has none or is not a JWT. */
export function jwtExpiry (token: string): number | null {
  const part = token.split('.')[1]
  if (part === undefined) return null
  try {
    const b64 = part.replace(/-/g, '+').replace(/_/g, '/')
    const json = typeof atob === 'function' ? atob(b64) : ''
    const claims: unknown = JSON.parse(json)
    const exp = typeof claims === 'object' && claims !== null ? (claims as Record<string, unknown>).exp : null
    return typeof exp === 'number' && Number.isFinite(exp) ? exp : null
  } catch {
    return null
  }
}

function grantOf (v: TokenGrant | string | null): TokenGrant | null {
  if (v === null) return null
  const g = typeof v === 'string' ? { token: v } : v
  return { token: g.token, expiresAt: g.expiresAt !== undefined ? g.expiresAt : jwtExpiry(g.token) }
}

/** When to renew a token that expires at `expiresAt` (Unix s), seen at `now` (ms): a delay in ms. */
export function refreshDelay (expiresAt: number, now: number, marginMs: number): number {
  const left = expiresAt * 1000 - now
  // A short-lived token is renewed half-way through what is left of it.
  return Math.max(0, left - Math.min(marginMs, left / 2))
}

type Listener = (...args: never[]) => void

/** One room: a `Y.Doc` kept in sync with the server, its awareness, and typed connection events. */
export class RoomConnection {
  readonly doc: Y.Doc
  readonly provider: WebsocketProvider
  readonly awareness: Awareness
  readonly room: string
  private grant: TokenGrant | null = null
  private refreshTimer: ReturnType<typeof setTimeout> | undefined
  private readonly listeners = new Map<keyof RoomEvents, Set<Listener>>()
  private destroyed = false
  private lastProbe = 0
  private failures = 0
  /** Whether the caller wants the socket open (`connect()` until `disconnect()`). */
  private wanted = false
  private reconnectTimer: ReturnType<typeof setTimeout> | undefined
  private readonly opts: RoomConnectionOptions
  private readonly ownDoc: boolean

  constructor (opts: RoomConnectionOptions) {
    this.opts = opts
    this.room = opts.room
    this.ownDoc = opts.doc === undefined
    this.doc = opts.doc ?? new Y.Doc()
    const ws = httpBase(opts.server).replace(/^http/, 'ws')
    this.provider = new WebsocketProvider(`${ws}/rooms`, opts.room, this.doc, {
      connect: false,
      params: {},
      disableBc: true,
      // With `renewOnReconnect` this connection reconnects by itself, after a new token.
      shouldReconnect: (event: CloseEvent) => opts.renewOnReconnect !== true && reconnectsAfter(event.code),
      ...(opts.WebSocket !== undefined ? { WebSocketPolyfill: opts.WebSocket as typeof WebSocket } : {})
    })
    this.awareness = this.provider.awareness
    this.provider.on('status', ({ status }) => {
      if (status === 'connected') this.failures = 0
      this.emit('status', status)
    })
    this.provider.on('sync', (synced: boolean) => this.emit('synced', synced))
    this.provider.on('connection-close', (event: CloseEvent | null) => this.onClose(event))
    // The y-protocols auth message (permission denied) would only be logged by the provider.
    this.provider.messageHandlers[2] = (_enc: unknown, decoder: decoding.Decoder) => {
      authProtocol.readAuthMessage(decoder, this.doc, (_doc: unknown, reason: string) => this.emit('permission-denied', reason))
    }
    if (opts.connect !== false) void this.connect()
  }

  /** The token in use (`null`: none). */
  get token (): string | null { return this.grant?.token ?? null }

  /** Whether the document has synced with the server since the last connect. */
  get synced (): boolean { return this.provider.synced }

  on<E extends keyof RoomEvents>(event: E, fn: RoomEvents[E]): () => void {
    let set = this.listeners.get(event)
    if (set === undefined) { set = new Set(); this.listeners.set(event, set) }
    set.add(fn as Listener)
    return () => { set?.delete(fn as Listener) }
  }

  private emit<E extends keyof RoomEvents>(event: E, ...args: Parameters<RoomEvents[E]>): void {
    for (const fn of this.listeners.get(event) ?? []) (fn as (...a: unknown[]) => void)(...args)
  }

  /** Resolves at the next first sync (at once when synced). */
  async whenSynced (): Promise<void> {
    if (this.provider.synced) return
    await new Promise<void>(resolve => {
      const off = this.on('synced', s => { if (s) { off(); resolve() } })
    })
  }

  /** Gets a token (when a source is given) and connects. */
  async connect (): Promise<void> {
    if (this.destroyed) return
    this.wanted = true
    clearTimeout(this.reconnectTimer)
    if (this.opts.token !== undefined) {
      const ok = await this.renewToken(false)
      if (!ok) return
    }
    this.provider.connect()
  }

  /** Closes the socket (no reconnect until `connect()`). */
  disconnect (): void {
    this.wanted = false
    clearTimeout(this.refreshTimer)
    clearTimeout(this.reconnectTimer)
    this.provider.disconnect()
  }

  /** Closes for good (and destroys the document when the connection made it). */
  destroy (): void {
    this.destroyed = true
    this.wanted = false
    clearTimeout(this.refreshTimer)
    clearTimeout(this.reconnectTimer)
    this.provider.destroy()
    // The awareness renews its state on a timer until destroyed.
    this.awareness.destroy()
    if (this.ownDoc) this.doc.destroy()
    this.listeners.clear()
  }

  /** Asks the token source for a new token, uses it, and schedules the next renewal; false when it failed. */
  async renewToken (reconnect: boolean, quiet = false): Promise<boolean> {
    const source = this.opts.token
    if (source === undefined) return true
    let grant: TokenGrant | null
    try {
      grant = grantOf(await source())
    } catch (e) {
      if (!quiet) this.emit('error', e instanceof Error ? e : new Error(String(e)))
      return false
    }
    if (this.destroyed) return false
    this.grant = grant
    if (grant !== null) this.provider.params.token = grant.token
    else delete this.provider.params.token
    clearTimeout(this.refreshTimer)
    if (grant?.expiresAt != null) {
      const delay = refreshDelay(grant.expiresAt, Date.now(), this.opts.refreshMarginMs ?? 60_000)
      // setTimeout takes at most 2^31-1 ms.
      this.refreshTimer = setTimeout(() => { void this.renewToken(true) }, Math.min(delay, 2 ** 31 - 1))
    }
    if (grant !== null) this.emit('token', grant)
    if (reconnect && this.provider.shouldConnect) {
      // The live socket keeps the old token until it closes: reconnect with the new one now.
      this.provider.disconnect()
      this.provider.connect()
    }
    return true
  }

  /**
   * With `renewOnReconnect`: after a backoff (0.2 s doubling to 5 s), a new token, then the
   * socket; a token source that fails (the server is down) counts as a failed attempt and waits
   * for the next try, without opening a socket.
   */
  private scheduleRenewedReconnect (): void {
    if (!this.wanted || this.destroyed) return
    clearTimeout(this.reconnectTimer)
    const delay = Math.min(100 * 2 ** Math.min(this.failures + 1, 6), 5000)
    this.reconnectTimer = setTimeout(() => {
      void this.renewToken(false, true).then(ok => {
        if (!this.wanted || this.destroyed) return
        if (ok) { this.provider.connect(); return }
        this.emit('connect-failed', ++this.failures)
        this.scheduleRenewedReconnect()
      })
    }, delay)
  }

  private onClose (event: CloseEvent | null): void {
    if (event === null || this.destroyed) return
    const opened = this.provider.wsconnected
    if (!opened) this.emit('connect-failed', ++this.failures)
    if (event.code === 1006 || event.code === 1002) {
      // A refusal before the upgrade reaches a browser as a bare 1006: ask over HTTP why.
      if (this.opts.renewOnReconnect === true) {
        if (opened) this.scheduleRenewedReconnect()
        else void this.probe().then(refused => { if (!refused) this.scheduleRenewedReconnect() })
      } else if (!opened) {
        void this.probe()
      }
      return
    }
    const close: RoomClose = { code: event.code, reason: event.reason, kind: closeKind(event.code) }
    this.emit('close', close)
    switch (close.kind) {
      case 'token-expired':
        this.emit('token-expired', close)
        void this.renewToken(false).then(ok => { if (ok && !this.destroyed) this.provider.connect() })
        break
      case 'policy': this.emit('policy-violation', close); break
      case 'too-large': this.emit('too-large', close); break
      case 'try-again': this.emit('try-again', close); break
      default: break
    }
    if (this.opts.renewOnReconnect === true && close.kind !== 'token-expired' && reconnectsAfter(close.code)) this.scheduleRenewedReconnect()
  }

  /**
   * Asks over plain HTTP why the socket was refused (the token goes in `Authorization`, so no
   * URL, and no browser console line about it, carries the token). True when it was refused
   * (and the connection stopped, or was renewed once for an expired token).
   */
  private async probe (): Promise<boolean> {
    const now = Date.now()
    if (now - this.lastProbe < 3000) return false
    this.lastProbe = now
    const url = `${httpBase(this.opts.server)}/rooms/${encodeURIComponent(this.room)}`
    const headers: Record<string, string> = this.grant !== null ? { authorization: `Bearer ${this.grant.token}` } : {}
    let status = 0
    let body: unknown = null
    try {
      const res = await (this.opts.fetch ?? fetch)(url, { headers })
      status = res.status
      body = await res.json().catch(() => null)
    } catch {
      return false // unreachable: the connection keeps retrying
    }
    if (![400, 401, 403, 503].includes(status)) return false
    const b = typeof body === 'object' && body !== null ? body as Record<string, unknown> : {}
    const refusal: RoomRefusal = { status, error: typeof b.error === 'string' ? b.error : '', detail: typeof b.detail === 'string' ? b.detail : '' }
    if (status === 503) { this.emit('refused', refusal); return false }
    this.provider.disconnect()
    this.emit('refused', refusal)
    // An expired token with a source to renew it: try once more with a new one.
    if (status === 401 && refusal.error === 'token_expired' && this.opts.token !== undefined) {
      if (await this.renewToken(false)) this.provider.connect()
    }
    return true
  }
}
