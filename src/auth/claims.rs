//! The claims of a verified token, and the time / issuer / audience checks against an injected
//! clock.
//!
//! Owns: turning a signature-verified JSON payload into [`Claims`] (`exp` required, `nbf`,
//! `iss`, `aud` checked when configured, leeway applied). Must not verify signatures (see
//! `verify.rs`) and must not read the system clock: `now` is always passed in.

use serde_json::{Map, Value};

use super::AuthError;
use super::glob::room_matches;
use super::scope::{Scope, Scopes};

/// What the configuration requires of claims, besides the signature.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClaimRules {
    /// Required `iss`, when configured.
    pub issuer: Option<String>,
    /// Required member of `aud`, when configured. When unset, a token's `aud` is not checked.
    pub audience: Option<String>,
    /// Seconds of clock skew tolerated on `exp` and `nbf`.
    pub leeway: u64,
}

/// The identity and grants of a verified token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claims {
    /// Who the user is (required, non-empty); recorded in transaction origins.
    pub sub: String,
    /// Display name, when given.
    pub name: Option<String>,
    /// Room names or `*` globs this token opens; empty means no room.
    pub rooms: Vec<String>,
    /// Effective scopes (implications applied).
    pub scopes: Scopes,
    /// The token's `exp`, in unix seconds.
    pub exp: u64,
    /// The token's `nbf`, when present.
    pub nbf: Option<u64>,
    /// The token's `iat`, when present (informational only).
    pub iat: Option<u64>,
    /// The token's `iss`, when present.
    pub iss: Option<String>,
    /// The unix second from which this token is no longer accepted: `exp` plus the configured
    /// leeway. Sessions opened with this token must end then (what `authenticate` accepts and
    /// what ends a session stay consistent).
    pub valid_until: u64,
}

impl Claims {
    /// Whether any pattern of the `rooms` claim matches `room` (exact name or `*` glob).
    ///
    /// `admin` does not widen this: an admin of `team-*` is an admin of those rooms only.
    pub fn allows_room(&self, room: &str) -> bool {
        self.rooms.iter().any(|pattern| room_matches(pattern, room))
    }

    /// Whether the token grants `scope` (with implications).
    pub fn has_scope(&self, scope: Scope) -> bool {
        self.scopes.has(scope)
    }

    /// Checks a signature-verified payload against `rules` at `now` and extracts the claims.
    ///
    /// Order: shape, `exp` (required), `nbf`, `iss`, `aud`, `sub`, then the grants; so an
    /// expired token is reported as expired even if other claims are also wrong.
    pub(crate) fn from_payload(
        payload: &Value,
        rules: &ClaimRules,
        now: u64,
    ) -> Result<Claims, AuthError> {
        let Some(obj) = payload.as_object() else {
            return Err(AuthError::MalformedToken(
                "the claims are not a JSON object".into(),
            ));
        };

        let exp = time_claim(obj, "exp")?.ok_or(AuthError::MissingExp)?;
        let valid_until = exp.saturating_add(rules.leeway);
        if now >= valid_until {
            return Err(AuthError::TokenExpired { exp, now });
        }
        let nbf = time_claim(obj, "nbf")?;
        if let Some(nbf) = nbf
            && now.saturating_add(rules.leeway) < nbf
        {
            return Err(AuthError::TokenNotYetValid { nbf, now });
        }
        let iat = time_claim(obj, "iat")?;

        let iss = match obj.get("iss") {
            None | Some(Value::Null) => None,
            Some(Value::String(iss)) => Some(iss.clone()),
            Some(_) => return Err(invalid("iss", "expected a string")),
        };
        if let Some(expected) = &rules.issuer
            && iss.as_deref() != Some(expected.as_str())
        {
            return Err(AuthError::WrongIssuer);
        }
        if let Some(expected) = &rules.audience
            && !audience_contains(obj.get("aud"), expected)?
        {
            return Err(AuthError::WrongAudience);
        }

        let sub = match obj.get("sub") {
            Some(Value::String(sub)) if !sub.trim().is_empty() => sub.clone(),
            _ => return Err(AuthError::MissingSub),
        };
        let name = match obj.get("name") {
            None | Some(Value::Null) => None,
            Some(Value::String(name)) => Some(name.clone()),
            Some(_) => return Err(invalid("name", "expected a string")),
        };
        let rooms = match obj.get("rooms") {
            None | Some(Value::Null) => Vec::new(),
            Some(value) => rooms_claim(value)?,
        };
        let scopes = match obj.get("scope") {
            None | Some(Value::Null) => Scopes::default(),
            Some(value) => Scopes::from_claim(value)?,
        };

        Ok(Claims {
            sub,
            name,
            rooms,
            scopes,
            exp,
            nbf,
            iat,
            iss,
            valid_until,
        })
    }
}

fn invalid(claim: &'static str, reason: &str) -> AuthError {
    AuthError::InvalidClaim {
        claim,
        reason: reason.into(),
    }
}

/// A NumericDate claim: absent/null → `None`; a non-negative number (fractions truncated);
/// anything else is invalid.
fn time_claim(obj: &Map<String, Value>, claim: &'static str) -> Result<Option<u64>, AuthError> {
    match obj.get(claim) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => {
            if let Some(secs) = n.as_u64() {
                Ok(Some(secs))
            } else {
                match n.as_f64() {
                    // In range and non-negative: truncation to whole seconds is intended.
                    Some(f) if f.is_finite() && f >= 0.0 && f < u64::MAX as f64 => {
                        Ok(Some(f as u64))
                    }
                    _ => Err(invalid(claim, "expected a non-negative number of seconds")),
                }
            }
        }
        Some(_) => Err(invalid(claim, "expected a number of seconds")),
    }
}

/// `aud` is a string or an array of strings (RFC 7519 §4.1.3).
fn audience_contains(aud: Option<&Value>, expected: &str) -> Result<bool, AuthError> {
    match aud {
        None | Some(Value::Null) => Ok(false),
        Some(Value::String(aud)) => Ok(aud == expected),
        Some(Value::Array(items)) => Ok(items.iter().any(|item| item.as_str() == Some(expected))),
        Some(_) => Err(invalid("aud", "expected a string or an array of strings")),
    }
}

/// `rooms` is an array of patterns; a single string is accepted as a comma- or
/// space-separated list (room names contain neither).
fn rooms_claim(value: &Value) -> Result<Vec<String>, AuthError> {
    match value {
        Value::String(list) => Ok(list
            .split([',', ' '])
            .filter(|p| !p.is_empty())
            .map(str::to_owned)
            .collect()),
        Value::Array(items) => items
            .iter()
            .map(|item| {
                item.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| invalid("rooms", "array items must be strings"))
            })
            .collect(),
        _ => Err(invalid(
            "rooms",
            "expected an array of room names or patterns",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const NOW: u64 = 1_800_000_000;

    fn rules() -> ClaimRules {
        ClaimRules {
            issuer: None,
            audience: None,
            leeway: 5,
        }
    }

    fn check(payload: Value) -> Result<Claims, AuthError> {
        Claims::from_payload(&payload, &rules(), NOW)
    }

    #[test]
    fn full_claims_parse() {
        let claims = check(json!({
            "sub": "u1", "name": "Ada", "rooms": ["a", "team-*"],
            "scope": "read fairies", "exp": NOW + 60, "nbf": NOW - 1, "iat": NOW - 1
        }));
        let Ok(claims) = claims else {
            panic!("expected valid claims: {claims:?}");
        };
        assert_eq!(claims.sub, "u1");
        assert_eq!(claims.name.as_deref(), Some("Ada"));
        assert!(claims.allows_room("a") && claims.allows_room("team-x"));
        assert!(!claims.allows_room("b"));
        assert!(claims.has_scope(Scope::Read) && claims.has_scope(Scope::Fairies));
        assert!(!claims.has_scope(Scope::Write));
        assert_eq!(claims.valid_until, NOW + 65);
    }

    #[test]
    fn exp_is_required_and_checked_with_leeway() {
        assert_eq!(check(json!({"sub": "u"})), Err(AuthError::MissingExp));
        assert!(check(json!({"sub": "u", "exp": NOW - 4})).is_ok());
        assert_eq!(
            check(json!({"sub": "u", "exp": NOW - 5})),
            Err(AuthError::TokenExpired {
                exp: NOW - 5,
                now: NOW
            })
        );
        assert_eq!(
            check(json!({"sub": "u", "exp": 0})).map_err(|e| e.code()),
            Err("token_expired")
        );
    }

    #[test]
    fn nbf_is_checked_with_leeway() {
        assert!(check(json!({"sub": "u", "exp": NOW + 60, "nbf": NOW + 5})).is_ok());
        assert_eq!(
            check(json!({"sub": "u", "exp": NOW + 60, "nbf": NOW + 6})),
            Err(AuthError::TokenNotYetValid {
                nbf: NOW + 6,
                now: NOW
            })
        );
    }

    #[test]
    fn odd_time_values() {
        assert!(check(json!({"sub": "u", "exp": (NOW + 60) as f64 + 0.5})).is_ok());
        assert_eq!(
            check(json!({"sub": "u", "exp": "soon"})).map_err(|e| e.code()),
            Err("invalid_claim")
        );
        assert_eq!(
            check(json!({"sub": "u", "exp": -1})).map_err(|e| e.code()),
            Err("invalid_claim")
        );
        assert_eq!(
            check(json!({"sub": "u", "exp": 1e300})).map_err(|e| e.code()),
            Err("invalid_claim")
        );
        // Far-future exp plus leeway saturates instead of overflowing.
        assert!(check(json!({"sub": "u", "exp": u64::MAX})).is_ok());
    }

    #[test]
    fn issuer_and_audience_when_configured() {
        let rules = ClaimRules {
            issuer: Some("https://id.example".into()),
            audience: Some("fairyring".into()),
            leeway: 0,
        };
        let ok = json!({"sub": "u", "exp": NOW + 9, "iss": "https://id.example", "aud": ["x", "fairyring"]});
        assert!(Claims::from_payload(&ok, &rules, NOW).is_ok());
        let no_iss = json!({"sub": "u", "exp": NOW + 9, "aud": "fairyring"});
        assert_eq!(
            Claims::from_payload(&no_iss, &rules, NOW),
            Err(AuthError::WrongIssuer)
        );
        let bad_aud =
            json!({"sub": "u", "exp": NOW + 9, "iss": "https://id.example", "aud": "other"});
        assert_eq!(
            Claims::from_payload(&bad_aud, &rules, NOW),
            Err(AuthError::WrongAudience)
        );
        // Not configured: not checked.
        assert!(check(json!({"sub": "u", "exp": NOW + 9, "iss": "x", "aud": "y"})).is_ok());
    }

    #[test]
    fn sub_must_be_a_non_empty_string() {
        for sub in [json!(null), json!(""), json!("  "), json!(7)] {
            assert_eq!(
                check(json!({"sub": sub, "exp": NOW + 9})),
                Err(AuthError::MissingSub)
            );
        }
        assert_eq!(check(json!({"exp": NOW + 9})), Err(AuthError::MissingSub));
    }

    #[test]
    fn rooms_forms() {
        let c = check(json!({"sub": "u", "exp": NOW + 9, "rooms": "a, team-*"}));
        assert_eq!(c.map(|c| c.rooms), Ok(vec!["a".into(), "team-*".into()]));
        let none = check(json!({"sub": "u", "exp": NOW + 9}));
        assert!(none.is_ok_and(|c| !c.allows_room("a")));
        assert!(check(json!({"sub": "u", "exp": NOW + 9, "rooms": {"a": 1}})).is_err());
        assert!(check(json!({"sub": "u", "exp": NOW + 9, "rooms": [1]})).is_err());
    }

    #[test]
    fn payload_must_be_an_object() {
        assert_eq!(
            check(json!([1, 2])).map_err(|e| e.code()),
            Err("malformed_token")
        );
    }
}
