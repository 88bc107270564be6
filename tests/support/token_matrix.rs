//! The token matrix shared by `tests/auth_tokens.rs` (auth module level) and
//! `tests/auth_matrix.rs` (through the real server over WebSockets): one table, two layers, so
//! the server cannot drift from the module.
//!
//! Keys: `tests/fixtures/keys/*.pem`, generated once with OpenSSL 3
//! (`openssl genpkey -algorithm RSA|EC|ED25519 …`, `openssl pkey -pubout`). Test keys only.

use std::path::PathBuf;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use fairyring::config::{JwtAlg, ServeConfig};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

/// The HS256 secret of the `Hs` and `HsIssAud` verifiers.
pub const SECRET: &str = "matrix-secret-0123456789abcdef";
/// `--jwt-issuer` of the `HsIssAud` verifier.
pub const ISSUER: &str = "https://id.example.test";
/// `--jwt-audience` of the `HsIssAud` verifier.
pub const AUDIENCE: &str = "fairyring-test";
/// The room most cases ask for.
pub const ROOM: &str = "alpha";

/// Which server configuration verifies a case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verifier {
    /// HS256 with [`SECRET`], no issuer/audience.
    Hs,
    /// HS256 with [`SECRET`], [`ISSUER`] and [`AUDIENCE`] required.
    HsIssAud,
    /// RS256 with `rsa_public.pem`.
    Rs,
    /// ES256 with `ec_public.pem`.
    Es,
    /// EdDSA with `ed25519_public.pem`.
    Ed,
}

impl Verifier {
    /// Every verifier, for starting one server each.
    pub const ALL: [Verifier; 5] = [
        Verifier::Hs,
        Verifier::HsIssAud,
        Verifier::Rs,
        Verifier::Es,
        Verifier::Ed,
    ];

    /// The `serve` configuration of this verifier (on top of `ServeConfig::for_test()`).
    pub fn config(self) -> ServeConfig {
        let mut config = ServeConfig::for_test();
        config.jwt_leeway = 5;
        match self {
            Verifier::Hs => config.jwt_secret = Some(SECRET.into()),
            Verifier::HsIssAud => {
                config.jwt_secret = Some(SECRET.into());
                config.jwt_issuer = Some(ISSUER.into());
                config.jwt_audience = Some(AUDIENCE.into());
            }
            Verifier::Rs => {
                config.jwt_alg = JwtAlg::Rs256;
                config.jwt_public_key = Some(key_path("rsa_public.pem"));
            }
            Verifier::Es => {
                config.jwt_alg = JwtAlg::Es256;
                config.jwt_public_key = Some(key_path("ec_public.pem"));
            }
            Verifier::Ed => {
                config.jwt_alg = JwtAlg::EdDsa;
                config.jwt_public_key = Some(key_path("ed25519_public.pem"));
            }
        }
        config
    }
}

/// What must happen to a case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Accepted; `can_write` says whether the peer may change the document.
    Accept {
        /// Whether the peer may write.
        can_write: bool,
    },
    /// Refused before the upgrade with this status and `error` code.
    Refuse {
        /// HTTP status.
        status: u16,
        /// The JSON body's `error`.
        code: &'static str,
    },
}

/// One row of the matrix.
#[derive(Debug, Clone)]
pub struct Case {
    /// Row name, for failure messages.
    pub name: &'static str,
    /// Which configuration verifies it.
    pub verifier: Verifier,
    /// The token sent (may be empty: no token).
    pub token: String,
    /// The room asked for.
    pub room: &'static str,
    /// The expected outcome.
    pub expect: Expect,
}

/// Path of a key fixture.
pub fn key_path(file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/keys")
        .join(file)
}

fn key_bytes(file: &str) -> Vec<u8> {
    std::fs::read(key_path(file)).unwrap_or_else(|e| panic!("fixture {file}: {e}"))
}

/// Standard claims valid at `now` for one hour, with these rooms and scope.
pub fn claims(now: u64, rooms: Value, scope: Value) -> Value {
    json!({"sub": "alice", "name": "Alice", "exp": now + 3600, "iat": now, "rooms": rooms, "scope": scope})
}

fn with(mut claims: Value, key: &str, value: Value) -> Value {
    if let Some(obj) = claims.as_object_mut() {
        if value.is_null() {
            obj.remove(key);
        } else {
            obj.insert(key.into(), value);
        }
    }
    claims
}

fn sign(alg: Algorithm, key: &EncodingKey, claims: &Value) -> String {
    jsonwebtoken::encode(&Header::new(alg), claims, key).unwrap_or_else(|e| panic!("sign: {e}"))
}

/// HS256 with [`SECRET`].
pub fn hs(claims: &Value) -> String {
    sign(
        Algorithm::HS256,
        &EncodingKey::from_secret(SECRET.as_bytes()),
        claims,
    )
}

/// HS256 with some other secret.
pub fn hs_wrong_secret(claims: &Value) -> String {
    sign(
        Algorithm::HS256,
        &EncodingKey::from_secret(b"not-the-secret"),
        claims,
    )
}

/// The key-confusion attack: HS256 "signed" with the server's RSA *public* key as the secret.
pub fn hs_with_rsa_public_key(claims: &Value) -> String {
    sign(
        Algorithm::HS256,
        &EncodingKey::from_secret(&key_bytes("rsa_public.pem")),
        claims,
    )
}

/// RS256 with `rsa_private.pem`.
pub fn rs(claims: &Value) -> String {
    let key = EncodingKey::from_rsa_pem(&key_bytes("rsa_private.pem"))
        .unwrap_or_else(|e| panic!("rsa key: {e}"));
    sign(Algorithm::RS256, &key, claims)
}

/// RS256 with another RSA key than the server's.
pub fn rs_other_key(claims: &Value) -> String {
    let key = EncodingKey::from_rsa_pem(&key_bytes("rsa_other_private.pem"))
        .unwrap_or_else(|e| panic!("rsa key: {e}"));
    sign(Algorithm::RS256, &key, claims)
}

/// ES256 with `ec_private.pem`.
pub fn es(claims: &Value) -> String {
    let key = EncodingKey::from_ec_pem(&key_bytes("ec_private.pem"))
        .unwrap_or_else(|e| panic!("ec key: {e}"));
    sign(Algorithm::ES256, &key, claims)
}

/// EdDSA with `ed25519_private.pem`.
pub fn ed(claims: &Value) -> String {
    let key = EncodingKey::from_ed_pem(&key_bytes("ed25519_private.pem"))
        .unwrap_or_else(|e| panic!("ed key: {e}"));
    sign(Algorithm::EdDSA, &key, claims)
}

/// An unsigned token (`alg: none`, empty signature).
pub fn unsigned(claims: &Value) -> String {
    format!(
        "{}.{}.",
        URL_SAFE_NO_PAD.encode(r#"{"alg":"none","typ":"JWT"}"#),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    )
}

/// A valid HS256 token whose payload was then replaced (signature no longer matches).
pub fn tampered(claims: &Value, forged: &Value) -> String {
    let token = hs(claims);
    let mut parts = token.split('.');
    let header = parts.next().unwrap_or_default();
    let _ = parts.next();
    let signature = parts.next().unwrap_or_default();
    format!(
        "{header}.{}.{signature}",
        URL_SAFE_NO_PAD.encode(forged.to_string())
    )
}

const fn refuse(status: u16, code: &'static str) -> Expect {
    Expect::Refuse { status, code }
}

const WRITER: Expect = Expect::Accept { can_write: true };
const READER: Expect = Expect::Accept { can_write: false };

/// The whole matrix at time `now` (unix seconds).
pub fn cases(now: u64) -> Vec<Case> {
    use Verifier::*;
    let rw = claims(now, json!([ROOM]), json!("read write"));
    let ro = claims(now, json!([ROOM]), json!("read"));
    let iss_aud = with(
        with(rw.clone(), "iss", json!(ISSUER)),
        "aud",
        json!([AUDIENCE, "other"]),
    );
    let case = |name, verifier, token: String, room, expect| Case {
        name,
        verifier,
        token,
        room,
        expect,
    };
    vec![
        case("valid HS256", Hs, hs(&rw), ROOM, WRITER),
        case("valid RS256", Rs, rs(&rw), ROOM, WRITER),
        case("valid ES256", Es, es(&rw), ROOM, WRITER),
        case("valid EdDSA", Ed, ed(&rw), ROOM, WRITER),
        case(
            "no token",
            Hs,
            String::new(),
            ROOM,
            refuse(401, "missing_token"),
        ),
        case(
            "not a jwt",
            Hs,
            "not-a-jwt".into(),
            ROOM,
            refuse(401, "malformed_token"),
        ),
        case(
            "expired",
            Hs,
            hs(&with(rw.clone(), "exp", json!(now - 3600))),
            ROOM,
            refuse(401, "token_expired"),
        ),
        case(
            "expired within leeway",
            Hs,
            hs(&with(rw.clone(), "exp", json!(now - 1))),
            ROOM,
            WRITER,
        ),
        case(
            "nbf in the future",
            Hs,
            hs(&with(rw.clone(), "nbf", json!(now + 600))),
            ROOM,
            refuse(401, "token_not_yet_valid"),
        ),
        case(
            "no exp",
            Hs,
            hs(&with(rw.clone(), "exp", Value::Null)),
            ROOM,
            refuse(401, "missing_exp"),
        ),
        case(
            "bad signature (HS256)",
            Hs,
            hs_wrong_secret(&rw),
            ROOM,
            refuse(401, "bad_signature"),
        ),
        case(
            "bad signature (RS256)",
            Rs,
            rs_other_key(&rw),
            ROOM,
            refuse(401, "bad_signature"),
        ),
        case(
            "tampered payload",
            Hs,
            tampered(&ro, &claims(now, json!(["*"]), json!("admin"))),
            ROOM,
            refuse(401, "bad_signature"),
        ),
        case(
            "alg none (HS server)",
            Hs,
            unsigned(&rw),
            ROOM,
            refuse(401, "wrong_algorithm"),
        ),
        case(
            "alg none (RS server)",
            Rs,
            unsigned(&rw),
            ROOM,
            refuse(401, "wrong_algorithm"),
        ),
        case(
            "HS256 token signed with the RSA public key, against the RS key",
            Rs,
            hs_with_rsa_public_key(&rw),
            ROOM,
            refuse(401, "wrong_algorithm"),
        ),
        case(
            "RS256 token against the HS secret",
            Hs,
            rs(&rw),
            ROOM,
            refuse(401, "wrong_algorithm"),
        ),
        case(
            "ES256 token against an EdDSA key",
            Ed,
            es(&rw),
            ROOM,
            refuse(401, "wrong_algorithm"),
        ),
        case(
            "issuer and audience match",
            HsIssAud,
            hs(&iss_aud),
            ROOM,
            WRITER,
        ),
        case(
            "wrong issuer",
            HsIssAud,
            hs(&with(iss_aud.clone(), "iss", json!("https://evil.test"))),
            ROOM,
            refuse(401, "wrong_issuer"),
        ),
        case(
            "missing issuer",
            HsIssAud,
            hs(&with(iss_aud.clone(), "iss", Value::Null)),
            ROOM,
            refuse(401, "wrong_issuer"),
        ),
        case(
            "wrong audience",
            HsIssAud,
            hs(&with(iss_aud.clone(), "aud", json!("someone-else"))),
            ROOM,
            refuse(401, "wrong_audience"),
        ),
        case(
            "missing sub",
            Hs,
            hs(&with(rw.clone(), "sub", Value::Null)),
            ROOM,
            refuse(401, "missing_sub"),
        ),
        case(
            "empty sub",
            Hs,
            hs(&with(rw.clone(), "sub", json!(""))),
            ROOM,
            refuse(401, "missing_sub"),
        ),
        case(
            "wrong room",
            Hs,
            hs(&rw),
            "beta",
            refuse(403, "room_not_granted"),
        ),
        case(
            "glob room matches",
            Hs,
            hs(&claims(now, json!(["team-*"]), json!("read write"))),
            "team-red",
            WRITER,
        ),
        case(
            "glob room does not match",
            Hs,
            hs(&claims(now, json!(["team-*"]), json!("read write"))),
            "teams",
            refuse(403, "room_not_granted"),
        ),
        case(
            "all rooms",
            Hs,
            hs(&claims(now, json!(["*"]), json!("read"))),
            "anything-at-all",
            READER,
        ),
        case(
            "scope as array",
            Hs,
            hs(&claims(now, json!([ROOM]), json!(["read", "write"]))),
            ROOM,
            WRITER,
        ),
        case("read-only", Hs, hs(&ro), ROOM, READER),
        case(
            "admin implies write",
            Hs,
            hs(&claims(now, json!([ROOM]), json!("admin"))),
            ROOM,
            WRITER,
        ),
        case(
            "fairies without read",
            Hs,
            hs(&claims(now, json!([ROOM]), json!("fairies"))),
            ROOM,
            refuse(403, "insufficient_scope"),
        ),
        case(
            "no scope",
            Hs,
            hs(&with(rw.clone(), "scope", Value::Null)),
            ROOM,
            refuse(403, "insufficient_scope"),
        ),
    ]
}

/// Claims for other tests: read-write on `room`, expiring at `exp`.
pub fn writer_token(room: &str, exp: u64) -> String {
    hs(&json!({"sub": "writer", "exp": exp, "rooms": [room], "scope": "read write"}))
}

/// Claims for other tests: read-only on `room`, expiring at `exp`.
pub fn reader_token(room: &str, exp: u64) -> String {
    hs(&json!({"sub": "reader", "exp": exp, "rooms": [room], "scope": "read"}))
}
