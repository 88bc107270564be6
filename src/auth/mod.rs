//! JWT verification and room/scope access control (I/O-free, clock injected).
//!
//! Owns: token verification, claims, room-glob matching, scopes, minting (HS256) and the
//! `fairyring token` flags. Must not touch sockets or stores, and never reads the system clock
//! on its own: every time check takes `now` (unix seconds) from the caller ([`unix_now`] is
//! the helper the edge uses), so expiry is tested without sleeping. The one file it reads is
//! the `--jwt-public-key` PEM, once, in [`Authenticator::from_config`].
//!
//! How the server uses it, per WebSocket upgrade (refusals come before the upgrade):
//! 1. [`token_from_request`] (`?token=` or `Authorization: Bearer`), `None` → [`AuthError::MissingToken`];
//! 2. [`Authenticator::authenticate`] → [`Claims`] (401 errors);
//! 3. [`authorize`] for the room → [`Access`] (403 errors); `can_write: false` means drop the
//!    peer's document updates; close the socket with 4401 at [`Access::expires_at`].
//!
//! Errors map to HTTP with [`AuthError::status`], [`AuthError::code`] and
//! [`AuthError::detail`] (or [`AuthError::body`] for the `{"error", "detail"}` JSON).
//!
//! # Layout
//! - `error.rs`: [`AuthError`], its status and stable codes.
//! - `verify.rs`: [`Authenticator`], key loading and the verification pipeline.
//! - `claims.rs`: [`Claims`], time / issuer / audience checks against the injected `now`.
//! - `scope.rs`: [`Scope`], [`Scopes`] and their implications.
//! - `glob.rs`: room patterns (`team-*`).
//! - `access.rs`: [`token_from_request`], [`authorize`], [`Access`].
//! - `mint.rs`: [`MintRequest`], [`DevToken`], minting.
//! - `cli.rs`: [`TokenArgs`] for `fairyring token`.

mod access;
mod claims;
mod cli;
mod error;
mod glob;
mod mint;
mod scope;
mod verify;

pub use access::{Access, authorize, authorize_scope, token_from_request};
pub use claims::{ClaimRules, Claims};
pub use cli::{TokenArgs, mint_from_args, parse_ttl};
pub use error::AuthError;
pub use glob::{is_valid_pattern, room_matches};
pub use mint::{DEV_TOKEN_TTL, DevBrowser, DevToken, MintRequest};
pub use scope::{Scope, Scopes};
pub use verify::{Authenticator, MAX_TOKEN_BYTES, alg_name};

/// Close code for a WebSocket whose token expired during the session (in the 4000–4999 range
/// reserved for applications; mirrors HTTP 401).
pub const CLOSE_TOKEN_EXPIRED: u16 = 4401;

/// The current time in unix seconds, for the edge to pass as `now` (0 if the clock is before
/// 1970, which then refuses every token as expired rather than panicking).
pub fn unix_now() -> u64 {
    use crate::clock::Clock;
    crate::clock::SystemClock.unix_secs()
}
