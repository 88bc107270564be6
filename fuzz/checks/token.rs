//! Fuzz check for `token` (shared by the cargo-fuzz target and `tests/sync/fuzz_corpus.rs`).
//!
//! The first byte picks what the rest is:
//! - even: a token string, verified by HS256 and ES256 authenticators;
//! - odd: a claims payload, HS256-signed correctly, so the bytes reach the claims checks
//!   (the path an attacker holding a valid key, or a buggy issuer, could drive).
//!
//! Invariants besides "no panic": an accepted token has a non-empty `sub` and is inside its
//! validity window; refusals are 401 from `authenticate` and 403 from `authorize`.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use fairyring::auth::{Authenticator, ClaimRules, authorize, room_matches, token_from_request};
use fairyring::config::JwtAlg;

const SECRET: &[u8] = b"fuzz-secret";
const EC_PUBLIC_PEM: &[u8] = include_bytes!("../../tests/fixtures/keys/ec_public.pem");
const NOW: u64 = 1_800_000_000;

/// Must never panic, whatever the bytes.
pub fn check(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let rules = ClaimRules {
        issuer: None,
        audience: None,
        leeway: u64::from(selector >> 4),
    };
    let Ok(hs) = Authenticator::hs256(SECRET, rules.clone()) else {
        panic!("hs256 authenticator must build");
    };
    if selector % 2 == 0 {
        let text = String::from_utf8_lossy(rest);
        let _ = token_from_request(Some(&text), Some(&text));
        verify(&hs, &text);
        if let Ok(es) = Authenticator::with_public_key_pem(JwtAlg::Es256, EC_PUBLIC_PEM, rules) {
            verify(&es, &text);
        }
    } else {
        let message = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256","typ":"JWT"}"#),
            URL_SAFE_NO_PAD.encode(rest)
        );
        let key = jsonwebtoken::EncodingKey::from_secret(SECRET);
        let Ok(sig) =
            jsonwebtoken::crypto::sign(message.as_bytes(), &key, jsonwebtoken::Algorithm::HS256)
        else {
            panic!("hs256 signing must work");
        };
        verify(&hs, &format!("{message}.{sig}"));
    }
}

fn verify(auth: &Authenticator, token: &str) {
    match auth.authenticate(token, NOW) {
        Ok(claims) => {
            assert!(
                !claims.sub.trim().is_empty(),
                "accepted a token without sub"
            );
            assert!(NOW < claims.valid_until, "accepted an expired token");
            for room in ["a", "team-x", token.get(..8).unwrap_or("")] {
                for pattern in &claims.rooms {
                    let _ = room_matches(pattern, room);
                }
                match authorize(&claims, room) {
                    Ok(access) => {
                        assert!(claims.allows_room(room));
                        assert_eq!(access.expires_at, claims.valid_until);
                        assert!(
                            !access.can_write || claims.scopes.read,
                            "write without read"
                        );
                    }
                    Err(e) => assert_eq!(e.status(), 403, "{e}"),
                }
            }
        }
        Err(e) => {
            assert_eq!(e.status(), 401, "{e}");
            let _ = e.body();
        }
    }
}
