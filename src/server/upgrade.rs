//! The WebSocket handshake (RFC 6455 over HTTP/1.1 `Upgrade`), done here rather than by axum's
//! `WebSocketUpgrade` so that the server keeps the upgraded connection itself: after a close
//! frame it must be able to read (and discard) what the peer still sends, even once the
//! WebSocket protocol layer has given up on the stream (a frame over the size limit ends
//! tungstenite's stream, not the TCP connection).
//!
//! Owns: checking the upgrade headers, the `101 Switching Protocols` answer and turning the
//! upgraded connection into a [`WebSocketStream`]. Must not know about rooms, tokens or limits
//! beyond the WebSocket configuration it is given.

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Response, StatusCode, header};
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};

/// The upgraded connection's byte stream.
pub type Io = TokioIo<hyper::upgrade::Upgraded>;
/// A server-side WebSocket over the upgraded connection.
pub type Socket = WebSocketStream<Io>;

/// Why a request is not a WebSocket handshake the server can accept.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum HandshakeError {
    /// `Connection` does not list `upgrade`.
    #[error("Connection header did not include 'upgrade'")]
    ConnectionHeader,
    /// `Upgrade` is not `websocket`.
    #[error("`Upgrade` header did not include 'websocket'")]
    UpgradeHeader,
    /// `Sec-WebSocket-Version` is not 13.
    #[error("`Sec-WebSocket-Version` header did not include '13'")]
    Version,
    /// `Sec-WebSocket-Key` is missing.
    #[error("`Sec-WebSocket-Key` header missing")]
    KeyMissing,
    /// The HTTP connection cannot be upgraded (HTTP/2 without extended CONNECT, or a test
    /// request without a connection).
    #[error("WebSocket request couldn't be upgraded since no upgrade state was present")]
    NotUpgradable,
}

/// A checked handshake, ready to answer `101` and upgrade.
pub struct Handshake {
    accept: HeaderValue,
    on_upgrade: OnUpgrade,
}

fn has_token(headers: &HeaderMap, name: header::HeaderName, token: &str) -> bool {
    headers.get_all(name).iter().any(|value| {
        value.to_str().is_ok_and(|v| {
            v.split(',')
                .any(|part| part.trim().eq_ignore_ascii_case(token))
        })
    })
}

impl Handshake {
    /// Checks the request's headers and takes its upgrade handle out of `extensions`.
    pub fn check(
        headers: &HeaderMap,
        extensions: &mut axum::http::Extensions,
    ) -> Result<Self, HandshakeError> {
        if !has_token(headers, header::CONNECTION, "upgrade") {
            return Err(HandshakeError::ConnectionHeader);
        }
        if !has_token(headers, header::UPGRADE, "websocket") {
            return Err(HandshakeError::UpgradeHeader);
        }
        if headers
            .get(header::SEC_WEBSOCKET_VERSION)
            .is_none_or(|v| v.as_bytes() != b"13")
        {
            return Err(HandshakeError::Version);
        }
        let key = headers
            .get(header::SEC_WEBSOCKET_KEY)
            .ok_or(HandshakeError::KeyMissing)?;
        let accept = HeaderValue::from_str(&derive_accept_key(key.as_bytes()))
            .map_err(|_| HandshakeError::KeyMissing)?;
        let on_upgrade = extensions
            .remove::<OnUpgrade>()
            .ok_or(HandshakeError::NotUpgradable)?;
        Ok(Handshake { accept, on_upgrade })
    }

    /// Answers `101` and runs `serve` on the WebSocket once the connection is upgraded (in a
    /// task of its own, like every connection's). A failed upgrade is logged and dropped.
    pub fn respond<F, Fut>(self, config: WebSocketConfig, serve: F) -> Response<Body>
    where
        F: FnOnce(Socket) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        let Handshake { accept, on_upgrade } = self;
        tokio::spawn(async move {
            match on_upgrade.await {
                Ok(upgraded) => {
                    let socket = WebSocketStream::from_raw_socket(
                        TokioIo::new(upgraded),
                        Role::Server,
                        Some(config),
                    )
                    .await;
                    serve(socket).await;
                }
                Err(error) => tracing::debug!(%error, "websocket upgrade failed"),
            }
        });
        let mut response = Response::new(Body::empty());
        *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
        let headers = response.headers_mut();
        headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        headers.insert(header::SEC_WEBSOCKET_ACCEPT, accept);
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.append(*k, HeaderValue::from_static(v));
        }
        map
    }

    const GOOD: &[(&str, &str)] = &[
        ("connection", "keep-alive, Upgrade"),
        ("upgrade", "websocket"),
        ("sec-websocket-version", "13"),
        ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="),
    ];

    #[test]
    fn headers_are_checked_in_order() {
        let mut ext = axum::http::Extensions::new();
        let check = |pairs: &[(&'static str, &'static str)], ext: &mut axum::http::Extensions| {
            Handshake::check(&headers(pairs), ext).err()
        };
        assert_eq!(check(&[], &mut ext), Some(HandshakeError::ConnectionHeader));
        assert_eq!(
            check(&GOOD[..1], &mut ext),
            Some(HandshakeError::UpgradeHeader)
        );
        assert_eq!(check(&GOOD[..2], &mut ext), Some(HandshakeError::Version));
        assert_eq!(
            check(&GOOD[..3], &mut ext),
            Some(HandshakeError::KeyMissing)
        );
        // Everything right but no connection to upgrade (a request built in a test).
        assert_eq!(check(GOOD, &mut ext), Some(HandshakeError::NotUpgradable));
    }

    #[test]
    fn accept_key_is_rfc_6455s() {
        assert_eq!(
            derive_accept_key(b"dGhlIHNhbXBsZSBub25jZQ=="),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
    }
}
