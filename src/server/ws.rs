//! WebSocket peers: `GET /rooms/{room}` refuses bad requests before the upgrade, then runs one
//! reader loop and one writer task per socket, joined by the room's bounded outbound queue.
//!
//! The reader enforces the size and rate limits and hands frames to the room; the writer sends
//! queued frames, pings, and the close frame when the room, the reader or shutdown asks for one.
//! After the server sends a close frame it keeps reading and discarding whatever the peer still
//! sends, until the peer closes or [`CLOSE_DRAIN`] passes: a socket dropped with unread input
//! is reset by the kernel, and a reset can overtake the close frame, so a browser would see
//! 1006 instead of 1009, 1008 or 4401. The handshake itself is in [`super::upgrade`].

use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::response::Response;
use bytes::Bytes;
use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use governor::{Quota, RateLimiter};
use tokio::io::AsyncReadExt;
use tokio::sync::{OwnedSemaphorePermit, mpsc, oneshot};
use tokio_tungstenite::tungstenite::Error as WsError;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::Frame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::AppState;
use super::access::{Admitted, ReadScope};
use super::error::{ApiError, close, close_for, truncate};
use super::upgrade::{Handshake, Socket};
use crate::room::{Peer, PeerInfo};

/// How often the server pings an idle peer.
pub const PING_INTERVAL: Duration = Duration::from_secs(20);
/// A peer that sent nothing (not even a pong) for this long is closed.
pub const PONG_TIMEOUT: Duration = Duration::from_secs(60);
/// A single socket write that takes longer than this ends the connection.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// Initial per-socket read buffer.
const READ_BUFFER: usize = 8 * 1024;
/// Largest WebSocket frame sent to a peer: a longer message (a cold-load answer, a large
/// batch) goes out fragmented (RFC 6455 section 5.4), which every WebSocket client reassembles.
/// tungstenite copies each frame into its connection's write buffer, whose capacity never
/// shrinks: one 1 MB cold-load answer left each of 100 peers holding a 1 MB buffer for the rest
/// of its connection (94 MB of a 153 MB heap peak, docs/benchmarks.md 2026-11-26, third session).
const MAX_FRAME_BYTES: usize = 32 * 1024;
/// Bytes of frames tungstenite gathers before writing them to the socket (its default: 128
/// KiB). With [`MAX_FRAME_BYTES`] it bounds a connection's write buffer near 64 KiB; a batch of
/// small frames still goes out in one write.
const WRITE_BUFFER: usize = 32 * 1024;
/// How long the reader waits for the writer to send a close frame.
const CLOSE_GRACE: Duration = Duration::from_secs(2);
/// After a close frame, how long the server keeps reading (and discarding) the peer's input
/// while it waits for the peer to close.
pub const CLOSE_DRAIN: Duration = Duration::from_secs(1);

/// Joins a room: the Yjs WebSocket.
///
/// Validates the name (400), the token (401/403) and capacity (503), in that order, before the
/// upgrade (name and token through [`Admitted`]); a plain GET that
/// passes them is answered 426.
#[utoipa::path(
    get,
    operation_id = "joinRoom",
    path = "/rooms/{room}",
    tag = "rooms",
    params(super::openapi::RoomPath),
    security(("bearer" = ["read"]), ("token" = ["read"])),
    responses(
        (status = 101, description = "The Yjs WebSocket (y-protocols sync and awareness, binary frames; docs/protocol.md). A token without `write` joins read-only."),
        (status = 400, description = "`invalid_room_name`", body = super::error::ErrorBody),
        super::openapi::TokenRefusals,
        (status = 426, description = "`websocket_upgrade_required`: a plain GET", body = super::error::ErrorBody),
        (status = 503, description = "`too_many_connections`, `room_full`, `too_many_rooms`, `shutting_down`", body = super::error::ErrorBody),
    ),
)]
pub async fn upgrade(
    State(state): State<AppState>,
    admission: Admitted<ReadScope>,
    request: Request,
) -> Result<Response, ApiError> {
    let (mut parts, _) = request.into_parts();
    let headers = &parts.headers;
    let name = admission.room;
    let handshake = Handshake::check(headers, &mut parts.extensions).map_err(|e| {
        ApiError::new(
            axum::http::StatusCode::UPGRADE_REQUIRED,
            "websocket_upgrade_required",
            e.to_string(),
        )
    })?;
    let permit = state.connections.clone().try_acquire_owned().map_err(|_| {
        ApiError::new(
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            "too_many_connections",
            "server connection limit reached",
        )
    })?;
    // The room's fairies appear as awareness peers of this room instance: the hub hosts them
    // when the room loads (`FairyHub`'s listener on the registry), not on every upgrade.
    let room = state.rooms.get(&name).await?;
    if room.peer_count() >= state.config.max_connections_per_room {
        return Err(crate::room::RoomError::RoomFull.into());
    }
    let info = PeerInfo {
        conn: crate::room::peers::peer::next_conn_id(),
        sub: admission.sub,
        name: admission.name,
        can_write: admission.can_write,
    };
    let expires_at = admission.expires_at;
    let hard_cap = state
        .config
        .max_message_bytes
        .saturating_mul(2)
        .max(state.config.max_message_bytes + 65_536);
    let span = tracing::info_span!("conn", room = %name, conn = info.conn, sub = %info.sub);
    let tracker = state.tracker.clone();
    let config = WebSocketConfig::default()
        // tungstenite preallocates its read buffer per socket (128 KiB by default); most y-sync
        // frames are small, and the buffer grows for the rare large one.
        .read_buffer_size(READ_BUFFER)
        .write_buffer_size(WRITE_BUFFER)
        .max_message_size(Some(hard_cap))
        .max_frame_size(Some(hard_cap));
    Ok(handshake.respond(config, move |socket| {
        tracker.track_future(
            async move {
                match room.join(info) {
                    Ok((peer, rx)) => serve_peer(socket, peer, rx, state, permit, expires_at).await,
                    Err(error) => refuse_joined(socket, &error, &state).await,
                }
            }
            .instrument(span),
        )
    }))
}

fn close_message(code: u16, reason: String) -> Message {
    Message::Close(Some(CloseFrame {
        code: code.into(),
        reason: reason.into(),
    }))
}

async fn refuse_joined(mut socket: Socket, error: &crate::room::RoomError, state: &AppState) {
    let (code, metric, reason) = close_for(error);
    crate::metrics::global().close(metric);
    let _ = tokio::time::timeout(WRITE_TIMEOUT, socket.send(close_message(code, reason))).await;
    drain(socket, state).await;
}

/// How the reader ended.
enum ReadEnd {
    /// The peer closed (close frame or end of stream): nothing is left to read.
    PeerClosed,
    /// The WebSocket layer failed; the connection may still hold unread bytes.
    Broken,
    /// The server must close the peer with this.
    Close(CloseRequest),
    /// The writer ended the session (it sent a close frame, or the socket failed).
    WriterDone,
}

/// A close the reader asks the writer to send.
struct CloseRequest {
    code: u16,
    metric: &'static str,
    reason: String,
}

async fn serve_peer(
    socket: Socket,
    peer: Peer,
    rx: mpsc::Receiver<Bytes>,
    state: AppState,
    permit: OwnedSemaphorePermit,
    expires_at: Option<u64>,
) {
    tracing::debug!("peer joined");
    let (sink, stream) = socket.split();
    let done = CancellationToken::new();
    let (close_tx, close_rx) = oneshot::channel();
    let last_seen = Arc::new(AtomicU64::new(0));
    let started = tokio::time::Instant::now();
    let writer = tokio::spawn(
        write_loop(
            sink,
            rx,
            close_rx,
            peer.control().clone(),
            // A token of its own under the server's: the writer waits on it between frames,
            // which on the shared token would take one lock all sockets share.
            state.shutdown.child_token(),
            done.clone(),
            last_seen.clone(),
            started,
        )
        .in_current_span(),
    );
    // The session ends when the token does (close 4401); the client reconnects with a new one.
    let expiry = expires_at.map(|at| {
        let left = at.saturating_sub(crate::auth::unix_now());
        tokio::time::Instant::now() + Duration::from_secs(left)
    });
    let mut stream = stream;
    let end = tokio::select! {
        end = read_loop(&mut stream, &peer, &state, &done, &last_seen, started) => end,
        _ = sleep_until_opt(expiry) => ReadEnd::Close(CloseRequest {
            code: close::TOKEN_EXPIRED,
            metric: "token_expired",
            reason: "token expired: reconnect with a fresh token".into(),
        }),
    };
    let readable = match end {
        ReadEnd::PeerClosed => false,
        ReadEnd::Broken | ReadEnd::WriterDone => true,
        ReadEnd::Close(request) => {
            tracing::info!(code = request.code, reason = %request.reason, "closing peer");
            crate::metrics::global().close(request.metric);
            let _ = close_tx.send(request);
            true
        }
    };
    done.cancel();
    let sink = tokio::time::timeout(CLOSE_GRACE, writer).await;
    // The peer leaves the room (and frees its connection slot) before the socket is drained.
    drop(peer);
    drop(permit);
    tracing::debug!("peer left");
    if let (true, Ok(Ok(sink))) = (readable, sink)
        && let Ok(socket) = stream.reunite(sink)
    {
        drain(socket, &state).await;
    }
}

/// After the server's close frame: reads and discards the peer's input until the peer closes
/// (its close frame, or the end of the connection) or [`CLOSE_DRAIN`] passes, so that the
/// socket is not dropped with unread input (which resets the connection and can destroy the
/// close frame before the peer reads it). Once the WebSocket layer has failed (a frame over
/// the size limit ends tungstenite's stream with its payload unread), the raw connection is
/// read until the peer ends it. Skipped during shutdown, which must not wait on peers.
async fn drain(mut socket: Socket, state: &AppState) {
    use futures_util::stream::FusedStream;
    if state.shutdown.is_cancelled() {
        return;
    }
    let discard = async {
        while !socket.is_terminated() {
            match socket.next().await {
                // The closing handshake is complete (tungstenite answered or acknowledged the
                // peer's close frame), or the peer is gone: nothing more will come.
                None | Some(Ok(Message::Close(_))) => return,
                Some(Err(WsError::ConnectionClosed | WsError::AlreadyClosed | WsError::Io(_))) => {
                    return;
                }
                Some(Ok(_)) | Some(Err(_)) => {}
            }
        }
        let mut buf = vec![0u8; READ_BUFFER];
        let io = socket.get_mut();
        while let Ok(n) = io.read(&mut buf).await {
            if n == 0 {
                break;
            }
        }
    };
    tokio::select! {
        _ = discard => {}
        _ = tokio::time::sleep(CLOSE_DRAIN) => tracing::debug!("peer did not close in time"),
        _ = state.shutdown.cancelled() => {}
    }
}

async fn sleep_until_opt(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

fn elapsed_ms(started: tokio::time::Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// The per-connection byte bucket (`--rate-bytes-per-sec`): its burst holds at least one
/// message of the largest size allowed, so a single large frame is never refused by it alone.
fn byte_limiter(per_sec: u32, max_message: usize) -> governor::DefaultDirectRateLimiter {
    let rate = NonZeroU32::new(per_sec).unwrap_or(NonZeroU32::MIN);
    let burst = u32::try_from(max_message)
        .ok()
        .and_then(NonZeroU32::new)
        .map_or(rate, |max| max.max(rate));
    RateLimiter::direct(Quota::per_second(rate).allow_burst(burst))
}

/// Reads frames until the peer leaves or must be closed.
async fn read_loop(
    stream: &mut SplitStream<Socket>,
    peer: &Peer,
    state: &AppState,
    done: &CancellationToken,
    last_seen: &AtomicU64,
    started: tokio::time::Instant,
) -> ReadEnd {
    let rate = NonZeroU32::new(state.config.rate_per_sec).unwrap_or(NonZeroU32::MIN);
    let burst = NonZeroU32::new(state.config.rate_burst).unwrap_or(rate);
    let limiter = RateLimiter::direct(Quota::per_second(rate).allow_burst(burst));
    let max = state.config.max_message_bytes;
    let bytes = byte_limiter(state.config.rate_bytes_per_sec, max);
    let writer_done = done.cancelled();
    tokio::pin!(writer_done);
    loop {
        let message = tokio::select! {
            _ = &mut writer_done => return ReadEnd::WriterDone,
            message = stream.next() => message,
        };
        last_seen.store(elapsed_ms(started), Ordering::Relaxed);
        let frame = match message {
            None | Some(Ok(Message::Close(_))) => return ReadEnd::PeerClosed,
            // A frame or message over tungstenite's hard cap: refused from its header, before
            // its payload is read, so the payload is still on the connection.
            Some(Err(WsError::Capacity(error))) => {
                return ReadEnd::Close(CloseRequest {
                    code: close::TOO_BIG,
                    metric: "too_big",
                    reason: truncate(&error.to_string(), 120),
                });
            }
            Some(Err(WsError::ConnectionClosed | WsError::AlreadyClosed | WsError::Io(_))) => {
                return ReadEnd::PeerClosed;
            }
            Some(Err(error)) => {
                tracing::debug!(%error, "socket error");
                return ReadEnd::Broken;
            }
            Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => continue,
            Some(Ok(Message::Text(_))) => {
                return ReadEnd::Close(CloseRequest {
                    code: close::UNSUPPORTED,
                    metric: "text_frame",
                    reason: "text frames are not part of the y-protocols".into(),
                });
            }
            Some(Ok(Message::Binary(frame))) => frame,
        };
        if frame.len() > max {
            return ReadEnd::Close(CloseRequest {
                code: close::TOO_BIG,
                metric: "too_big",
                reason: format!(
                    "message of {} bytes exceeds the limit of {max}",
                    frame.len()
                ),
            });
        }
        if limiter.check().is_err() {
            return ReadEnd::Close(CloseRequest {
                code: close::POLICY,
                metric: "rate_limited",
                reason: "message rate limit exceeded".into(),
            });
        }
        let size = NonZeroU32::new(u32::try_from(frame.len()).unwrap_or(u32::MAX));
        if let Some(size) = size
            && !matches!(bytes.check_n(size), Ok(Ok(())))
        {
            return ReadEnd::Close(CloseRequest {
                code: close::POLICY,
                metric: "rate_limited",
                reason: "byte rate limit exceeded".into(),
            });
        }
        if let Err(error) = peer.handle(&frame).await {
            tracing::warn!(%error, "refusing peer input");
            let (code, metric, reason) = close_for(&error);
            return ReadEnd::Close(CloseRequest {
                code,
                metric,
                reason,
            });
        }
    }
}

/// Most frames one socket write carries: what was queued behind the first frame goes out with
/// it, up to this many.
const MAX_FRAMES_PER_WRITE: usize = 64;

/// Sends `first` and whatever else is already queued (up to [`MAX_FRAMES_PER_WRITE`]) with one
/// flush: under load a peer's queue holds several frames, and writing them one flush each costs
/// a system call and a TCP segment per frame.
async fn send_queued(
    sink: &mut SplitSink<Socket, Message>,
    first: Bytes,
    rx: &mut mpsc::Receiver<Bytes>,
) -> Result<(), WsError> {
    feed(sink, first).await?;
    for _ in 1..MAX_FRAMES_PER_WRITE {
        match rx.try_recv() {
            Ok(frame) => feed(sink, frame).await?,
            Err(_) => break,
        }
    }
    sink.flush().await
}

/// Feeds one queued frame to the socket (its fragments when it is large).
async fn feed(sink: &mut SplitSink<Socket, Message>, frame: Bytes) -> Result<(), WsError> {
    if frame.len() <= MAX_FRAME_BYTES {
        return sink.feed(Message::Binary(frame)).await;
    }
    for message in fragments(frame) {
        sink.feed(message).await?;
    }
    Ok(())
}

/// `frame` as what is fed to the socket: one binary message when it fits in
/// [`MAX_FRAME_BYTES`], else the frames of a fragmented one (views of `frame`, not copies).
fn fragments(frame: Bytes) -> Vec<Message> {
    if frame.len() <= MAX_FRAME_BYTES {
        return vec![Message::Binary(frame)];
    }
    let mut rest = frame;
    let mut parts = Vec::with_capacity(rest.len().div_ceil(MAX_FRAME_BYTES));
    let mut opcode = OpCode::Data(Data::Binary);
    while !rest.is_empty() {
        let part = rest.split_to(MAX_FRAME_BYTES.min(rest.len()));
        parts.push(Message::Frame(Frame::message(
            part,
            opcode,
            rest.is_empty(),
        )));
        opcode = OpCode::Data(Data::Continue);
    }
    parts
}

#[allow(clippy::too_many_arguments)]
async fn write_loop(
    mut sink: SplitSink<Socket, Message>,
    mut rx: mpsc::Receiver<Bytes>,
    mut close_rx: oneshot::Receiver<CloseRequest>,
    control: Arc<crate::room::PeerControl>,
    shutdown: CancellationToken,
    done: CancellationToken,
    last_seen: Arc<AtomicU64>,
    started: tokio::time::Instant,
) -> SplitSink<Socket, Message> {
    let mut ping = tokio::time::interval_at(started + PING_INTERVAL, PING_INTERVAL);
    // The cancellation waits are made once, not once per frame (each is a waiter registered
    // under its token's lock).
    let kicked = control.kicked();
    let shutting_down = shutdown.cancelled();
    let ended = done.cancelled();
    tokio::pin!(kicked, shutting_down, ended);
    let close = loop {
        tokio::select! {
            biased;
            request = &mut close_rx => {
                break request.ok().map(|r| (r.code, r.reason));
            }
            _ = &mut kicked => {
                let reason = control.reason().map(close_for);
                if let Some((_, metric, _)) = &reason {
                    crate::metrics::global().close(metric);
                }
                break reason.map(|(code, _, text)| (code, text));
            }
            _ = &mut shutting_down => break Some((close::GOING_AWAY, "server shutting down".into())),
            _ = &mut ended => break None,
            frame = rx.recv() => {
                let Some(frame) = frame else { break Some((close::GOING_AWAY, "room closed".into())) };
                match tokio::time::timeout(WRITE_TIMEOUT, send_queued(&mut sink, frame, &mut rx)).await {
                    Ok(Ok(())) => {}
                    Ok(Err(_)) => {
                        crate::metrics::global().close("write_failed");
                        break None;
                    }
                    // A reader that stopped reading: told so if its socket still takes a
                    // close frame (it resyncs when it reconnects).
                    Err(_) => {
                        crate::metrics::global().close("slow_reader");
                        break Some((close::TRY_AGAIN_LATER, "frames were not read in time".into()));
                    }
                }
            }
            _ = ping.tick() => {
                let silent = elapsed_ms(started).saturating_sub(last_seen.load(Ordering::Relaxed));
                if u128::from(silent) > PONG_TIMEOUT.as_millis() {
                    crate::metrics::global().close("ping_timeout");
                    break Some((close::GOING_AWAY, "no pong received".into()));
                }
                if tokio::time::timeout(WRITE_TIMEOUT, sink.send(Message::Ping(Bytes::new()))).await.is_err() {
                    crate::metrics::global().close("slow_reader");
                    break Some((close::TRY_AGAIN_LATER, "frames were not read in time".into()));
                }
            }
        }
    };
    if let Some((code, reason)) = close {
        let _ = tokio::time::timeout(WRITE_TIMEOUT, sink.send(close_message(code, reason))).await;
    }
    let _ = tokio::time::timeout(WRITE_TIMEOUT, sink.close()).await;
    done.cancel();
    sink
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_frame_goes_out_whole() {
        let frame = Bytes::from(vec![7u8; MAX_FRAME_BYTES]);
        let parts = fragments(frame.clone());
        assert_eq!(parts.len(), 1);
        assert!(matches!(&parts[0], Message::Binary(b) if *b == frame));
    }

    #[test]
    fn a_large_frame_goes_out_as_one_fragmented_message() {
        let frame: Bytes = (0..(2 * MAX_FRAME_BYTES + 5))
            .map(|i| (i % 251) as u8)
            .collect::<Vec<_>>()
            .into();
        let parts = fragments(frame.clone());
        assert_eq!(parts.len(), 3);
        let mut joined = Vec::new();
        for (i, part) in parts.iter().enumerate() {
            let Message::Frame(f) = part else {
                panic!("part {i} is not a raw frame");
            };
            let expected = if i == 0 {
                OpCode::Data(Data::Binary)
            } else {
                OpCode::Data(Data::Continue)
            };
            assert_eq!(f.header().opcode, expected);
            assert_eq!(f.header().is_final, i == parts.len() - 1);
            assert!(f.payload().len() <= MAX_FRAME_BYTES);
            joined.extend_from_slice(f.payload());
        }
        assert_eq!(joined, frame);
    }
}
