//! The token matrix at the auth-module level: every row of `auth_support::token_matrix` through
//! `Authenticator::from_config` → `authenticate` → `authorize`, with an injected clock.
//! `tests/auth/auth_matrix.rs` runs the same rows through the real server.

use std::collections::HashMap;

use crate::support::token_matrix::{Case, Expect, Verifier, cases, writer_token};
use fairyring::auth::{AuthError, Authenticator, authorize, token_from_request};

/// A fixed "now" (2027-01-15), so nothing depends on the machine's clock.
const NOW: u64 = 1_800_000_000;

fn authenticators() -> HashMap<Verifier, Authenticator> {
    Verifier::ALL
        .into_iter()
        .map(|v| match Authenticator::from_config(&v.config()) {
            Ok(auth) => (v, auth),
            Err(e) => panic!("{v:?}: {e}"),
        })
        .collect()
}

fn outcome(auth: &Authenticator, case: &Case) -> Result<bool, AuthError> {
    let token = token_from_request(Some(&case.token), None).ok_or(AuthError::MissingToken)?;
    let claims = auth.authenticate(token, NOW)?;
    authorize(&claims, case.room).map(|access| access.can_write)
}

#[test]
fn token_matrix_at_module_level() {
    let auths = authenticators();
    let cases = cases(NOW);
    assert!(cases.len() >= 30, "the matrix lost rows");
    let mut failures = Vec::new();
    for case in &cases {
        let Some(auth) = auths.get(&case.verifier) else {
            panic!("no authenticator for {:?}", case.verifier);
        };
        let got = outcome(auth, case);
        let ok = match (case.expect, &got) {
            (Expect::Accept { can_write }, Ok(w)) => can_write == *w,
            (Expect::Refuse { status, code }, Err(e)) => e.status() == status && e.code() == code,
            _ => false,
        };
        if !ok {
            failures.push(format!(
                "{}: expected {:?}, got {:?}",
                case.name, case.expect, got
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "matrix failures:\n{}",
        failures.join("\n")
    );
}

#[test]
fn refusal_bodies_have_code_and_detail() {
    let auths = authenticators();
    for case in cases(NOW) {
        let Some(auth) = auths.get(&case.verifier) else {
            continue;
        };
        if let Err(e) = outcome(auth, &case) {
            let body = e.body();
            assert_eq!(body["error"], e.code(), "{}", case.name);
            let detail = body["detail"].as_str().unwrap_or_default();
            assert!(!detail.is_empty(), "{}", case.name);
            assert!(
                !detail.contains("matrix-secret"),
                "{}: leaks the secret",
                case.name
            );
        }
    }
}

/// Expiry with an injected clock: the same token is accepted until `exp + leeway` and refused
/// from then on, and `Access::expires_at` is exactly that instant (when the server closes 4401).
#[test]
fn expiry_follows_the_injected_clock() {
    let config = Verifier::Hs.config();
    let leeway = config.jwt_leeway;
    let Ok(auth) = Authenticator::from_config(&config) else {
        panic!("hs authenticator");
    };
    let exp = NOW + 2;
    let token = writer_token("alpha", exp);
    let access = auth
        .authenticate(&token, NOW)
        .and_then(|claims| authorize(&claims, "alpha"));
    assert_eq!(access.map(|a| a.expires_at), Ok(exp + leeway));
    assert!(auth.authenticate(&token, exp + leeway - 1).is_ok());
    let refused = auth.authenticate(&token, exp + leeway);
    assert_eq!(refused.map_err(|e| e.code()).err(), Some("token_expired"));
}

#[test]
fn bearer_header_carries_the_same_tokens() {
    let auths = authenticators();
    let Some(auth) = auths.get(&Verifier::Hs) else {
        panic!("hs authenticator");
    };
    let token = writer_token("alpha", NOW + 60);
    let header = format!("Bearer {token}");
    let found = token_from_request(None, Some(&header));
    assert_eq!(found, Some(token.as_str()));
    assert!(found.is_some_and(|t| auth.authenticate(t, NOW).is_ok()));
}
