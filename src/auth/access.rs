//! Room access: where the token comes from in a request, and what verified claims allow in one
//! room.
//!
//! Owns: [`token_from_request`], [`authorize`] and [`Access`]. Must not verify tokens (see
//! `verify.rs`) nor enforce anything: the server drops a read-only peer's updates and closes a
//! session at [`Access::expires_at`].

use super::AuthError;
use super::claims::Claims;
use super::error::truncate_for_detail;
use super::scope::Scope;

/// What one connection may do in one room, decided once before the upgrade.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Access {
    /// May send document updates; otherwise its sync step 2 and updates are dropped.
    pub can_write: bool,
    /// May invite, prompt and dismiss fairies.
    pub can_fairies: bool,
    /// Has the `admin` scope.
    pub admin: bool,
    /// Unix second at which the session must be closed (close code 4401): the token's `exp`
    /// plus the configured leeway, the same instant `authenticate` starts refusing it.
    pub expires_at: u64,
}

/// Grants access to `room` for verified `claims`: the room must match the `rooms` claim
/// (403 `room_not_granted`) and the token must have `read` (403 `insufficient_scope`).
pub fn authorize(claims: &Claims, room: &str) -> Result<Access, AuthError> {
    if !claims.allows_room(room) {
        return Err(AuthError::RoomNotGranted {
            room: truncate_for_detail(room),
        });
    }
    if !claims.has_scope(Scope::Read) {
        return Err(AuthError::InsufficientScope { needed: "read" });
    }
    Ok(Access {
        can_write: claims.scopes.write,
        can_fairies: claims.scopes.fairies,
        admin: claims.scopes.admin,
        expires_at: claims.valid_until,
    })
}

/// Like [`authorize`], and also requires `scope` (e.g. [`Scope::Fairies`] for the fairy HTTP
/// API, where the error names the missing scope).
pub fn authorize_scope(claims: &Claims, room: &str, scope: Scope) -> Result<Access, AuthError> {
    let access = authorize(claims, room)?;
    if claims.has_scope(scope) {
        Ok(access)
    } else {
        Err(AuthError::InsufficientScope {
            needed: scope.as_str(),
        })
    }
}

/// The token of a request: the `?token=` query value (what `y-websocket`'s `params` sends)
/// when non-empty, else the credentials of an `Authorization: Bearer …` header (scheme
/// case-insensitive, per RFC 7235). `None` means 401 `missing_token`.
pub fn token_from_request<'a>(
    query_token: Option<&'a str>,
    authorization_header: Option<&'a str>,
) -> Option<&'a str> {
    if let Some(token) = query_token.map(str::trim).filter(|t| !t.is_empty()) {
        return Some(token);
    }
    let header = authorization_header?.trim_start();
    let (scheme, credentials) = header.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    Some(credentials.trim()).filter(|t| !t.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::scope::Scopes;

    fn claims(rooms: &[&str], scopes: &[&str]) -> Claims {
        Claims {
            sub: "u".into(),
            name: None,
            rooms: rooms.iter().map(|r| (*r).to_owned()).collect(),
            scopes: Scopes::from_words(scopes.iter().copied()),
            exp: 100,
            nbf: None,
            iat: None,
            iss: None,
            valid_until: 105,
        }
    }

    #[test]
    fn read_only_access() {
        let access = authorize(&claims(&["a"], &["read"]), "a");
        assert_eq!(
            access,
            Ok(Access {
                can_write: false,
                can_fairies: false,
                admin: false,
                expires_at: 105
            })
        );
    }

    #[test]
    fn write_and_admin_flags() {
        let w = authorize(&claims(&["team-*"], &["write", "fairies"]), "team-x");
        assert!(w.is_ok_and(|a| a.can_write && a.can_fairies && !a.admin));
        let admin = authorize(&claims(&["a"], &["admin"]), "a");
        assert!(admin.is_ok_and(|a| a.can_write && a.can_fairies && a.admin));
    }

    #[test]
    fn refusals() {
        assert_eq!(
            authorize(&claims(&["a"], &["read"]), "b").map_err(|e| (e.status(), e.code())),
            Err((403, "room_not_granted"))
        );
        assert_eq!(
            authorize(&claims(&["a"], &["fairies"]), "a").map_err(|e| (e.status(), e.code())),
            Err((403, "insufficient_scope"))
        );
        assert_eq!(
            authorize(&claims(&[], &["admin"]), "a").map_err(|e| e.code()),
            Err("room_not_granted")
        );
        assert_eq!(
            authorize_scope(&claims(&["a"], &["write"]), "a", Scope::Fairies)
                .map_err(|e| e.detail()),
            Err("token scope does not include fairies".to_owned())
        );
        assert!(authorize_scope(&claims(&["a"], &["admin"]), "a", Scope::Fairies).is_ok());
    }

    #[test]
    fn token_sources() {
        assert_eq!(token_from_request(Some("q"), Some("Bearer h")), Some("q"));
        assert_eq!(token_from_request(None, Some("Bearer h")), Some("h"));
        assert_eq!(token_from_request(Some(""), Some("bearer  h ")), Some("h"));
        assert_eq!(token_from_request(None, Some("BEARER h")), Some("h"));
        assert_eq!(token_from_request(None, Some("Basic dXNlcjpw")), None);
        assert_eq!(token_from_request(None, Some("Bearer")), None);
        assert_eq!(token_from_request(None, Some("Bearer   ")), None);
        assert_eq!(token_from_request(None, Some("Bearerx h")), None);
        assert_eq!(token_from_request(None, None), None);
    }
}
