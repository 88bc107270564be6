//! Unit tests of `verify.rs`: configuration choices and the header / shape checks. The full
//! token matrix (every algorithm, every refusal) is in `tests/auth/auth_tokens.rs`.

use std::path::PathBuf;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, EncodingKey};
use serde_json::json;

use super::*;

const NOW: u64 = 1_800_000_000;
const SECRET: &[u8] = b"verify-unit-secret";

fn key_path(file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/keys")
        .join(file)
}

fn hs() -> Authenticator {
    match Authenticator::hs256(SECRET, ClaimRules::default()) {
        Ok(auth) => auth,
        Err(e) => panic!("{e}"),
    }
}

/// A compact JWS with any header and payload JSON, HS256-signed with `SECRET`.
fn signed(header: &serde_json::Value, payload: &[u8]) -> String {
    let message = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(payload)
    );
    let sig = jsonwebtoken::crypto::sign(
        message.as_bytes(),
        &EncodingKey::from_secret(SECRET),
        Algorithm::HS256,
    );
    match sig {
        Ok(sig) => format!("{message}.{sig}"),
        Err(e) => panic!("{e}"),
    }
}

fn code(result: Result<Claims, AuthError>) -> Result<String, &'static str> {
    result.map(|c| c.sub).map_err(|e| e.code())
}

fn good_payload() -> Vec<u8> {
    json!({"sub": "u", "exp": NOW + 60, "rooms": ["a"], "scope": "read"})
        .to_string()
        .into_bytes()
}

#[test]
fn a_well_signed_token_passes() {
    let token = signed(&json!({"alg": "HS256", "typ": "JWT"}), &good_payload());
    assert_eq!(code(hs().authenticate(&token, NOW)), Ok("u".into()));
}

#[test]
fn shape_errors_are_malformed() {
    let auth = hs();
    let oversized = "a".repeat(MAX_TOKEN_BYTES + 1);
    for token in [
        "abc",
        "a.b",
        "a.b.c.d",
        "!!!.b.c",
        oversized.as_str(),
        "eyJhbGciOiJIUzI1NiJ9..", // valid header, empty payload and signature
    ] {
        let got = code(auth.authenticate(token, NOW));
        assert!(
            got == Err("malformed_token") || got == Err("bad_signature"),
            "{token:.40}: {got:?}"
        );
    }
    assert_eq!(code(auth.authenticate("", NOW)), Err("missing_token"));
    let header_not_object = format!("{}.e30.sig", URL_SAFE_NO_PAD.encode("[1]"));
    assert_eq!(
        code(auth.authenticate(&header_not_object, NOW)),
        Err("malformed_token")
    );
}

#[test]
fn the_header_algorithm_must_be_the_configured_one() {
    let auth = hs();
    let none = format!(
        "{}.{}.",
        URL_SAFE_NO_PAD.encode(r#"{"alg":"none"}"#),
        URL_SAFE_NO_PAD.encode(good_payload())
    );
    let refused = auth.authenticate(&none, NOW);
    assert_eq!(code(refused.clone()), Err("wrong_algorithm"));
    assert!(refused.is_err_and(|e| e.detail().contains("none")));
    let hs512 = signed(&json!({"alg": "HS512"}), &good_payload());
    assert_eq!(code(auth.authenticate(&hs512, NOW)), Err("wrong_algorithm"));
    let no_alg = signed(&json!({"typ": "JWT"}), &good_payload());
    assert_eq!(
        code(auth.authenticate(&no_alg, NOW)),
        Err("malformed_token")
    );
}

#[test]
fn critical_extensions_are_refused() {
    let token = signed(&json!({"alg": "HS256", "crit": ["exp"]}), &good_payload());
    assert_eq!(code(hs().authenticate(&token, NOW)), Err("malformed_token"));
}

#[test]
fn tampering_breaks_the_signature() {
    let token = signed(&json!({"alg": "HS256"}), &good_payload());
    let forged = json!({"sub": "admin", "exp": NOW + 60, "rooms": ["*"], "scope": "admin"});
    let mut parts: Vec<&str> = token.split('.').collect();
    let forged_payload = URL_SAFE_NO_PAD.encode(forged.to_string());
    if let Some(p) = parts.get_mut(1) {
        *p = &forged_payload;
    }
    assert_eq!(
        code(hs().authenticate(&parts.join("."), NOW)),
        Err("bad_signature")
    );
}

#[test]
fn signed_garbage_claims_are_malformed_not_panics() {
    let auth = hs();
    for payload in [&b"[1,2]"[..], b"null", b"\xff\xfe", b"{\"exp\":", b"7"] {
        let token = signed(&json!({"alg": "HS256"}), payload);
        let got = code(auth.authenticate(&token, NOW));
        assert_eq!(got, Err("malformed_token"), "{payload:?}");
    }
}

#[test]
fn config_hs256_needs_a_secret_unless_dev() {
    let mut config = ServeConfig::for_test();
    assert_eq!(
        Authenticator::from_config(&config)
            .map_err(|e| e.code())
            .err(),
        Some("auth_config")
    );
    config.dev = true;
    let dev = Authenticator::from_config(&config);
    assert!(dev.as_ref().is_ok_and(Authenticator::uses_generated_secret));
    // The generated secret signs and verifies its own dev tokens.
    let round_trip = dev.and_then(|a| {
        let t = a.mint_dev_token("ada", &crate::auth::DevBrowser::random(), NOW)?;
        a.authenticate(&t.token, NOW)
    });
    assert!(round_trip.is_ok());
    config.dev = false;
    config.jwt_secret = Some("s".into());
    assert!(Authenticator::from_config(&config).is_ok_and(|a| !a.uses_generated_secret()));
    config.jwt_secret = Some(String::new());
    assert!(Authenticator::from_config(&config).is_err());
}

#[test]
fn config_public_keys() {
    let cases = [
        (JwtAlg::Rs256, "rsa_public.pem", true),
        (JwtAlg::Es256, "ec_public.pem", true),
        (JwtAlg::EdDsa, "ed25519_public.pem", true),
        (JwtAlg::Rs256, "ec_public.pem", false),
        (JwtAlg::Es256, "ed25519_public.pem", false),
        (JwtAlg::EdDsa, "rsa_public.pem", false),
        (JwtAlg::Rs256, "rsa_private.pem", false),
        (JwtAlg::Rs256, "does_not_exist.pem", false),
    ];
    for (alg, file, ok) in cases {
        let mut config = ServeConfig::for_test();
        config.jwt_alg = alg;
        config.jwt_public_key = Some(key_path(file));
        let built = Authenticator::from_config(&config);
        assert_eq!(built.is_ok(), ok, "{alg:?} {file}: {built:?}");
        if let Err(e) = built {
            assert_eq!(e.code(), "auth_config");
        }
    }
}

#[test]
fn config_contradictions_are_refused() {
    let mut rs_without_key = ServeConfig::for_test();
    rs_without_key.jwt_alg = JwtAlg::Rs256;
    let mut rs_with_secret = rs_without_key.clone();
    rs_with_secret.jwt_public_key = Some(key_path("rsa_public.pem"));
    rs_with_secret.jwt_secret = Some("s".into());
    let mut rs_dev = rs_without_key.clone();
    rs_dev.jwt_public_key = Some(key_path("rsa_public.pem"));
    rs_dev.dev = true;
    let mut hs_with_key = ServeConfig::for_test();
    hs_with_key.jwt_secret = Some("s".into());
    hs_with_key.jwt_public_key = Some(key_path("rsa_public.pem"));
    for config in [rs_without_key, rs_with_secret, rs_dev, hs_with_key] {
        assert!(Authenticator::from_config(&config).is_err(), "{config:?}");
    }
}

#[test]
fn public_key_authenticators_cannot_mint() {
    let pem = std::fs::read(key_path("ec_public.pem")).unwrap_or_default();
    let auth = Authenticator::with_public_key_pem(JwtAlg::Es256, &pem, ClaimRules::default());
    let minted =
        auth.and_then(|a| a.mint_dev_token("ada", &crate::auth::DevBrowser::random(), NOW));
    assert_eq!(
        minted.map_err(|e| e.code()).err(),
        Some("minting_unsupported")
    );
}

#[test]
fn debug_never_shows_the_secret() {
    let shown = format!("{:?}", hs());
    assert!(!shown.contains("verify-unit-secret"), "{shown}");
}
