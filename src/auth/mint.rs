//! Minting HS256 tokens: for operators (`fairyring token`) and for `--dev` mode
//! (`POST /auth/dev-token`).
//!
//! Owns: validating mint requests, the claims written into minted tokens, and dev-token
//! identities. Must not decide whether minting is allowed at all (the server only exposes the
//! dev route with `--dev`; the CLI needs the secret), and reads no clock: `now` is passed in.

use std::time::Duration;

use jsonwebtoken::{Algorithm, Header};
use rand::Rng as _;
use serde::Serialize;

use super::AuthError;
use super::error::truncate_for_detail;
use super::glob::is_valid_pattern;
use super::scope::Scopes;
use super::verify::{Authenticator, alg_name};

/// Lifetime of a dev token: short, since anyone can get one.
pub const DEV_TOKEN_TTL: Duration = Duration::from_secs(60 * 60);

/// Longest `sub` and display name accepted when minting (characters).
const MAX_IDENTITY_CHARS: usize = 128;

/// What to put in a minted token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MintRequest {
    /// Subject (user id); non-empty.
    pub sub: String,
    /// Optional display name.
    pub name: Option<String>,
    /// At least one room name or `*` glob, each `[A-Za-z0-9._-*]{1,128}`.
    pub rooms: Vec<String>,
    /// Scopes granted; at least one.
    pub scope: Scopes,
    /// Lifetime from `now`; at least one second.
    pub ttl: Duration,
}

/// A token handed out by `POST /auth/dev-token`, serialized as the route's JSON answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct DevToken {
    /// The signed JWT.
    pub token: String,
    /// The subject, `dev-BROWSER`: one per browser ([`DevBrowser`]), whatever name it asks
    /// for, so the per-`sub` limits bind a demo user across token renewals.
    pub sub: String,
    /// The display name asked for (trimmed).
    pub name: String,
    /// The token's `exp`, in unix seconds.
    pub expires_at: u64,
}

/// The id of one browser asking for dev tokens (kept in a cookie by the server's dev-token
/// route): 16 lowercase hex digits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DevBrowser(String);

impl DevBrowser {
    /// A fresh id.
    pub fn random() -> Self {
        DevBrowser(format!("{:016x}", rand::rng().random::<u64>()))
    }

    /// The id `text` names, if it is one (anything else, from a forged cookie, is not).
    pub fn parse(text: &str) -> Option<Self> {
        (text.len() == 16 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
            .then(|| DevBrowser(text.to_owned()))
    }

    /// The id's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for DevBrowser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

#[derive(Serialize)]
struct MintedClaims<'a> {
    sub: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    rooms: &'a [String],
    scope: String,
    iat: u64,
    exp: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    iss: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    aud: Option<&'a str>,
}

impl Authenticator {
    /// Signs a token for `request`, valid from `now` for `request.ttl`, carrying the configured
    /// `iss` / `aud` so it passes this server's own checks. HS256 only.
    pub fn mint(&self, request: MintRequest, now: u64) -> Result<String, AuthError> {
        let Some(key) = &self.encoding else {
            return Err(AuthError::MintingUnsupported(alg_name(self.algorithm())));
        };
        validate_identity("sub", &request.sub)?;
        if let Some(name) = &request.name {
            validate_identity("name", name)?;
        }
        if request.rooms.is_empty() {
            return Err(AuthError::InvalidRequest(
                "at least one room is required".into(),
            ));
        }
        if let Some(bad) = request.rooms.iter().find(|p| !is_valid_pattern(p)) {
            return Err(AuthError::InvalidRequest(format!(
                "room pattern {:?} must be 1-128 characters of A-Z a-z 0-9 . _ - or *",
                truncate_for_detail(bad)
            )));
        }
        if request.scope == Scopes::default() {
            return Err(AuthError::InvalidRequest(
                "at least one scope is required".into(),
            ));
        }
        let ttl = request.ttl.as_secs();
        if ttl == 0 {
            return Err(AuthError::InvalidRequest("ttl must be at least 1s".into()));
        }
        let exp = now
            .checked_add(ttl)
            .ok_or_else(|| AuthError::InvalidRequest("ttl is too long".into()))?;
        let claims = MintedClaims {
            sub: &request.sub,
            name: request.name.as_deref(),
            rooms: &request.rooms,
            scope: request.scope.to_claim_string(),
            iat: now,
            exp,
            iss: self.rules.issuer.as_deref(),
            aud: self.rules.audience.as_deref(),
        };
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, key)
            .map_err(|e| AuthError::Config(format!("signing failed: {e}")))
    }

    /// Mints a short-lived demo token for a display name: all rooms (`*`), scope
    /// `read write fairies`, [`DEV_TOKEN_TTL`], and the `sub` of the asking browser
    /// (`dev-BROWSER`): a renewed token keeps it, so limits per `sub` (the fairy API's rate)
    /// bind a demo user; two browsers are two people whatever names they type.
    pub fn mint_dev_token(
        &self,
        name: &str,
        browser: &DevBrowser,
        now: u64,
    ) -> Result<DevToken, AuthError> {
        let name = name.trim();
        validate_identity("name", name)?;
        let sub = format!("dev-{browser}");
        let token = self.mint(
            MintRequest {
                sub: sub.clone(),
                name: Some(name.to_owned()),
                rooms: vec!["*".into()],
                scope: Scopes {
                    read: true,
                    write: true,
                    fairies: true,
                    admin: false,
                },
                ttl: DEV_TOKEN_TTL,
            },
            now,
        )?;
        Ok(DevToken {
            token,
            sub,
            name: name.to_owned(),
            expires_at: now.saturating_add(DEV_TOKEN_TTL.as_secs()),
        })
    }
}

fn validate_identity(field: &str, value: &str) -> Result<(), AuthError> {
    let chars = value.chars().count();
    if value.trim().is_empty() {
        return Err(AuthError::InvalidRequest(format!("{field} is empty")));
    }
    if chars > MAX_IDENTITY_CHARS {
        return Err(AuthError::InvalidRequest(format!(
            "{field} is longer than {MAX_IDENTITY_CHARS} characters"
        )));
    }
    if value.chars().any(char::is_control) {
        return Err(AuthError::InvalidRequest(format!(
            "{field} contains control characters"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::claims::ClaimRules;
    use crate::auth::scope::Scope;

    const NOW: u64 = 1_800_000_000;

    fn hs() -> Authenticator {
        match Authenticator::hs256(b"unit-test-secret", ClaimRules::default()) {
            Ok(auth) => auth,
            Err(e) => panic!("{e}"),
        }
    }

    fn request() -> MintRequest {
        MintRequest {
            sub: "u1".into(),
            name: Some("Ada".into()),
            rooms: vec!["a".into(), "team-*".into()],
            scope: Scopes::from_words(["read", "fairies"]),
            ttl: Duration::from_secs(60),
        }
    }

    #[test]
    fn minted_tokens_verify_with_the_same_claims() {
        let auth = hs();
        let token = auth.mint(request(), NOW);
        let claims = token.and_then(|t| auth.authenticate(&t, NOW + 1));
        let Ok(claims) = claims else {
            panic!("{claims:?}");
        };
        assert_eq!(claims.sub, "u1");
        assert_eq!(claims.name.as_deref(), Some("Ada"));
        assert_eq!(claims.rooms, vec!["a".to_owned(), "team-*".to_owned()]);
        assert!(claims.has_scope(Scope::Fairies) && !claims.has_scope(Scope::Write));
        assert_eq!((claims.iat, claims.exp), (Some(NOW), NOW + 60));
    }

    #[test]
    fn minted_tokens_carry_configured_issuer_and_audience() {
        let rules = ClaimRules {
            issuer: Some("iss-x".into()),
            audience: Some("aud-y".into()),
            leeway: 0,
        };
        let auth = Authenticator::hs256(b"s", rules);
        let claims =
            auth.and_then(|a| a.mint(request(), NOW).and_then(|t| a.authenticate(&t, NOW)));
        assert!(claims.is_ok_and(|c| c.iss.as_deref() == Some("iss-x")));
    }

    #[test]
    fn bad_requests_are_refused() {
        let auth = hs();
        let cases: Vec<(&str, MintRequest)> = vec![
            (
                "empty sub",
                MintRequest {
                    sub: " ".into(),
                    ..request()
                },
            ),
            (
                "no rooms",
                MintRequest {
                    rooms: vec![],
                    ..request()
                },
            ),
            (
                "bad room",
                MintRequest {
                    rooms: vec!["a b".into()],
                    ..request()
                },
            ),
            (
                "no scope",
                MintRequest {
                    scope: Scopes::default(),
                    ..request()
                },
            ),
            (
                "zero ttl",
                MintRequest {
                    ttl: Duration::ZERO,
                    ..request()
                },
            ),
            (
                "huge ttl",
                MintRequest {
                    ttl: Duration::from_secs(u64::MAX),
                    ..request()
                },
            ),
            (
                "control name",
                MintRequest {
                    name: Some("a\nb".into()),
                    ..request()
                },
            ),
        ];
        for (what, req) in cases {
            let result = auth.mint(req, NOW);
            assert_eq!(
                result.map_err(|e| e.code()),
                Err("invalid_request"),
                "{what}"
            );
        }
    }

    #[test]
    fn dev_tokens_open_every_room_briefly_with_one_sub_per_browser() {
        let auth = hs();
        let (browser, other) = (DevBrowser::random(), DevBrowser::random());
        let (Ok(a), Ok(b), Ok(c)) = (
            auth.mint_dev_token(" Ada L. ", &browser, NOW),
            auth.mint_dev_token("Ada L.", &browser, NOW),
            auth.mint_dev_token("Ada L.", &other, NOW),
        ) else {
            panic!("dev tokens should mint");
        };
        assert_eq!(a.name, "Ada L.");
        assert_eq!(a.sub, format!("dev-{browser}"));
        assert_eq!(a.sub, b.sub, "one browser keeps its sub");
        assert_ne!(a.sub, c.sub, "two browsers are two people");
        assert_eq!(a.expires_at, NOW + 3600);
        let claims = auth.authenticate(&a.token, NOW);
        let Ok(claims) = claims else {
            panic!("{claims:?}");
        };
        assert!(claims.allows_room("anything"));
        assert!(claims.scopes.write && claims.scopes.fairies && !claims.scopes.admin);
        assert!(auth.authenticate(&a.token, NOW + 3600 + 1).is_err());
        assert!(auth.mint_dev_token("   ", &browser, NOW).is_err());
    }

    #[test]
    fn browser_ids_are_sixteen_hex_digits() {
        assert!(DevBrowser::parse(DevBrowser::random().as_str()).is_some());
        for bad in [
            "",
            "0123456789abcde",
            "0123456789ABCDEF",
            "0123456789abcdef0",
            "../etc/passwd!!",
        ] {
            assert!(DevBrowser::parse(bad).is_none(), "{bad}");
        }
    }
}
