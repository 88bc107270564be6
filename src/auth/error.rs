//! The one error type of the auth module, with the HTTP status and the stable code that the
//! network edge puts in its `{"error": CODE, "detail": TEXT}` bodies.
//!
//! Owns: the mapping from a refusal to 401 / 403 (and 400 / 500 for bad mint requests and bad
//! configuration). Must not build HTTP responses itself: that is the server's job.

use thiserror::Error;

/// Why a token was refused, a room denied, or the authenticator could not be built.
///
/// `Display` is the human-readable detail; [`AuthError::code`] is the stable machine code and
/// [`AuthError::status`] the HTTP status. Details never contain secrets or key material.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AuthError {
    /// No token in `?token=` nor in `Authorization: Bearer`.
    #[error("no token: pass it as ?token=… or in an `Authorization: Bearer …` header")]
    MissingToken,
    /// Not a compact JWS (three base64url parts), too long, or its header/claims are not JSON.
    #[error("malformed token: {0}")]
    MalformedToken(String),
    /// The header names another algorithm than the one this server is configured for
    /// (including `none`); the algorithm is never taken from the token.
    #[error("token algorithm {got} is not accepted: this server only accepts {expected}")]
    WrongAlgorithm {
        /// What the token's header said (truncated).
        got: String,
        /// The configured algorithm.
        expected: &'static str,
    },
    /// The signature does not verify with the configured key.
    #[error("token signature does not verify")]
    BadSignature,
    /// The token has no `exp` claim: every token must expire.
    #[error("token has no exp claim: every token must expire")]
    MissingExp,
    /// `exp` (plus leeway) is in the past.
    #[error("token expired at {exp} (now {now})")]
    TokenExpired {
        /// The token's `exp`.
        exp: u64,
        /// The time of the check.
        now: u64,
    },
    /// `nbf` (minus leeway) is in the future.
    #[error("token is not valid before {nbf} (now {now})")]
    TokenNotYetValid {
        /// The token's `nbf`.
        nbf: u64,
        /// The time of the check.
        now: u64,
    },
    /// `iss` is absent or differs from `--jwt-issuer`.
    #[error("token issuer is not the configured issuer")]
    WrongIssuer,
    /// `aud` is absent or does not contain `--jwt-audience`.
    #[error("token audience does not include the configured audience")]
    WrongAudience,
    /// `sub` is absent, empty or not a string.
    #[error("token has no sub claim (a non-empty string is required)")]
    MissingSub,
    /// A claim has the wrong JSON type (e.g. `exp` a string, `rooms` an object).
    #[error("invalid claim {claim}: {reason}")]
    InvalidClaim {
        /// The claim's name.
        claim: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// The token's `rooms` claim does not match the requested room.
    #[error("room {room} is not granted by this token")]
    RoomNotGranted {
        /// The requested room (truncated).
        room: String,
    },
    /// The token lacks the scope needed (e.g. no `read` for a room, no `fairies` for fairies).
    #[error("token scope does not include {needed}")]
    InsufficientScope {
        /// The missing scope word.
        needed: &'static str,
    },
    /// A mint request is invalid (empty sub, bad room pattern, zero TTL, bad scope word…).
    #[error("invalid token request: {0}")]
    InvalidRequest(String),
    /// Minting needs the HS256 secret; a server verifying with a public key cannot mint.
    #[error(
        "minting tokens needs an HS256 secret (--jwt-secret); this server verifies {0} tokens with a public key"
    )]
    MintingUnsupported(&'static str),
    /// The auth configuration is unusable (no secret, unreadable or wrong key file…).
    #[error("auth configuration: {0}")]
    Config(String),
}

impl AuthError {
    /// HTTP status for this refusal: 401 for anything wrong with the token itself, 403 when a
    /// valid token does not grant the room or scope, 400 for a bad mint request, 500 for
    /// configuration problems (a server fault, not the client's).
    pub fn status(&self) -> u16 {
        match self {
            AuthError::MissingToken
            | AuthError::MalformedToken(_)
            | AuthError::WrongAlgorithm { .. }
            | AuthError::BadSignature
            | AuthError::MissingExp
            | AuthError::TokenExpired { .. }
            | AuthError::TokenNotYetValid { .. }
            | AuthError::WrongIssuer
            | AuthError::WrongAudience
            | AuthError::MissingSub
            | AuthError::InvalidClaim { .. } => 401,
            AuthError::RoomNotGranted { .. } | AuthError::InsufficientScope { .. } => 403,
            AuthError::InvalidRequest(_) => 400,
            AuthError::MintingUnsupported(_) | AuthError::Config(_) => 500,
        }
    }

    /// Stable snake_case code for the `error` field of JSON bodies; clients may match on it.
    pub fn code(&self) -> &'static str {
        match self {
            AuthError::MissingToken => "missing_token",
            AuthError::MalformedToken(_) => "malformed_token",
            AuthError::WrongAlgorithm { .. } => "wrong_algorithm",
            AuthError::BadSignature => "bad_signature",
            AuthError::MissingExp => "missing_exp",
            AuthError::TokenExpired { .. } => "token_expired",
            AuthError::TokenNotYetValid { .. } => "token_not_yet_valid",
            AuthError::WrongIssuer => "wrong_issuer",
            AuthError::WrongAudience => "wrong_audience",
            AuthError::MissingSub => "missing_sub",
            AuthError::InvalidClaim { .. } => "invalid_claim",
            AuthError::RoomNotGranted { .. } => "room_not_granted",
            AuthError::InsufficientScope { .. } => "insufficient_scope",
            AuthError::InvalidRequest(_) => "invalid_request",
            AuthError::MintingUnsupported(_) => "minting_unsupported",
            AuthError::Config(_) => "auth_config",
        }
    }

    /// The human-readable detail for the `detail` field of JSON bodies (same as `Display`).
    pub fn detail(&self) -> String {
        self.to_string()
    }

    /// The JSON body `{"error": CODE, "detail": TEXT}` the edge sends with [`AuthError::status`].
    pub fn body(&self) -> serde_json::Value {
        serde_json::json!({ "error": self.code(), "detail": self.detail() })
    }
}

/// Truncates attacker-controlled text echoed in details (room names, header values) so an
/// error body never grows with the input.
pub(crate) fn truncate_for_detail(text: &str) -> String {
    const MAX_CHARS: usize = 64;
    if text.chars().count() <= MAX_CHARS {
        text.to_owned()
    } else {
        let mut out: String = text.chars().take(MAX_CHARS).collect();
        out.push('…');
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_problems_are_401_and_grants_are_403() {
        assert_eq!(AuthError::MissingToken.status(), 401);
        assert_eq!(AuthError::BadSignature.status(), 401);
        assert_eq!(AuthError::TokenExpired { exp: 1, now: 2 }.status(), 401);
        assert_eq!(AuthError::RoomNotGranted { room: "a".into() }.status(), 403);
        assert_eq!(
            AuthError::InsufficientScope { needed: "read" }.status(),
            403
        );
        assert_eq!(AuthError::Config("x".into()).status(), 500);
    }

    #[test]
    fn body_carries_code_and_detail() {
        let err = AuthError::InsufficientScope { needed: "write" };
        let body = err.body();
        assert_eq!(body["error"], "insufficient_scope");
        assert_eq!(body["detail"], "token scope does not include write");
    }

    #[test]
    fn details_are_lowercase_without_trailing_period() {
        let errors = [
            AuthError::MissingToken,
            AuthError::MalformedToken("x".into()),
            AuthError::BadSignature,
            AuthError::MissingExp,
            AuthError::WrongIssuer,
            AuthError::WrongAudience,
            AuthError::MissingSub,
            AuthError::InvalidRequest("x".into()),
            AuthError::MintingUnsupported("RS256"),
            AuthError::Config("x".into()),
        ];
        for err in errors {
            let detail = err.detail();
            let first = detail.chars().next().unwrap_or('x');
            assert!(first.is_lowercase(), "{detail}");
            assert!(!detail.ends_with('.'), "{detail}");
        }
    }

    #[test]
    fn long_echoed_text_is_truncated() {
        let long = "r".repeat(1000);
        let detail = AuthError::RoomNotGranted {
            room: truncate_for_detail(&long),
        }
        .detail();
        assert!(detail.len() < 120, "{detail}");
        assert_eq!(truncate_for_detail("short"), "short");
    }
}
