//! [`Authenticator`]: the configured key and algorithm, and token verification.
//!
//! Owns: building the verifier from `ServeConfig` (the only file read of the auth module is the
//! public-key PEM named by `--jwt-public-key`, at construction), and the verification pipeline:
//! size and shape → header `alg` must equal the configured one → signature (`jsonwebtoken`) →
//! claims against the injected `now` (`claims.rs`). Must not read the system clock, nor grant
//! rooms (see `access.rs`).
//!
//! `jsonwebtoken`'s own time, audience and required-claim checks are switched off: they read the
//! system clock, and doing them in `claims.rs` gives precise error codes and testable expiry.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Validation};
use rand::RngCore as _;
use serde_json::Value;

use super::AuthError;
use super::claims::{ClaimRules, Claims};
use super::error::truncate_for_detail;
use crate::config::{JwtAlg, ServeConfig};

/// Longest token accepted, in bytes. Real tokens are a few hundred bytes; the bound keeps
/// hostile inputs from costing base64/JSON/RSA work proportional to their size.
pub const MAX_TOKEN_BYTES: usize = 8 * 1024;

/// Bytes of the random HS256 secret generated for `--dev` without `--jwt-secret` (kept in the
/// store, so it outlives a restart).
const DEV_SECRET_BYTES: usize = 32;

/// Verifies tokens (and, with an HS256 secret, mints them) for one configuration.
///
/// The algorithm is fixed here, never taken from a token: a token whose header names another
/// algorithm (`none`, or HS256 against an RSA key, …) is refused before any cryptography.
pub struct Authenticator {
    alg: JwtAlg,
    decoding: DecodingKey,
    /// Present only for HS256, the one algorithm this server can also sign with.
    pub(crate) encoding: Option<EncodingKey>,
    validation: Validation,
    pub(crate) rules: ClaimRules,
    generated_secret: bool,
}

impl fmt::Debug for Authenticator {
    // Manual: never print key material.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Authenticator")
            .field("alg", &alg_name(self.alg))
            .field("rules", &self.rules)
            .field("generated_secret", &self.generated_secret)
            .finish_non_exhaustive()
    }
}

/// The JOSE name of an algorithm, as it appears in token headers.
pub fn alg_name(alg: JwtAlg) -> &'static str {
    match alg {
        JwtAlg::Hs256 => "HS256",
        JwtAlg::Rs256 => "RS256",
        JwtAlg::Es256 => "ES256",
        JwtAlg::EdDsa => "EdDSA",
    }
}

fn jose_alg(alg: JwtAlg) -> Algorithm {
    match alg {
        JwtAlg::Hs256 => Algorithm::HS256,
        JwtAlg::Rs256 => Algorithm::RS256,
        JwtAlg::Es256 => Algorithm::ES256,
        JwtAlg::EdDsa => Algorithm::EdDSA,
    }
}

impl Authenticator {
    /// Builds the authenticator the server uses, from the `serve` flags.
    ///
    /// - HS256 (default): `--jwt-secret`, or with `--dev` and no secret a random secret for this
    ///   process (tokens then only come from `POST /auth/dev-token`); the server passes the
    ///   one its store keeps instead ([`Authenticator::with_dev_secret`]).
    /// - RS256 / ES256 / EdDSA: `--jwt-public-key PEM_FILE` (read once, here).
    ///
    /// Contradictory or missing settings are a [`AuthError::Config`] error at start-up rather
    /// than a server that silently refuses (or accepts) everyone.
    pub fn from_config(config: &ServeConfig) -> Result<Authenticator, AuthError> {
        Authenticator::with_dev_secret(config, None)
    }

    /// A fresh random secret for `--dev` without `--jwt-secret`: the candidate the store keeps
    /// unless it keeps one already ([`crate::store::Store::dev_secret`]).
    pub fn new_dev_secret() -> Vec<u8> {
        let mut secret = vec![0u8; DEV_SECRET_BYTES];
        rand::rng().fill_bytes(&mut secret);
        secret
    }

    /// [`Authenticator::from_config`], signing `--dev` tokens (when no `--jwt-secret` is given)
    /// with `dev_secret`, the secret the store keeps across restarts, instead of a new one for
    /// this process (`None`).
    pub fn with_dev_secret(
        config: &ServeConfig,
        dev_secret: Option<&[u8]>,
    ) -> Result<Authenticator, AuthError> {
        let rules = ClaimRules {
            issuer: config.jwt_issuer.clone(),
            audience: config.jwt_audience.clone(),
            leeway: config.jwt_leeway,
        };
        match config.jwt_alg {
            JwtAlg::Hs256 => {
                if config.jwt_public_key.is_some() {
                    return Err(AuthError::Config(
                        "--jwt-public-key needs --jwt-alg RS256, ES256 or EdDSA (HS256 uses --jwt-secret)".into(),
                    ));
                }
                match (&config.jwt_secret, config.dev) {
                    (Some(secret), _) => Authenticator::hs256(secret.as_bytes(), rules),
                    (None, true) => {
                        let fresh;
                        let secret = match dev_secret {
                            Some(kept) => kept,
                            None => {
                                fresh = Authenticator::new_dev_secret();
                                &fresh
                            }
                        };
                        let mut auth = Authenticator::hs256(secret, rules)?;
                        auth.generated_secret = true;
                        Ok(auth)
                    }
                    (None, false) => Err(AuthError::Config(
                        "no way to verify tokens: set --jwt-secret (HS256) or --jwt-public-key with --jwt-alg, or run with --dev (or --insecure-no-auth to serve every room to anyone)".into(),
                    )),
                }
            }
            alg => {
                if config.jwt_secret.is_some() {
                    return Err(AuthError::Config(format!(
                        "--jwt-secret is for HS256 but --jwt-alg is {}; give only --jwt-public-key",
                        alg_name(alg)
                    )));
                }
                if config.dev {
                    return Err(AuthError::Config(format!(
                        "--dev mints HS256 tokens and cannot be combined with --jwt-alg {}",
                        alg_name(alg)
                    )));
                }
                let Some(path) = &config.jwt_public_key else {
                    return Err(AuthError::Config(format!(
                        "--jwt-alg {} needs --jwt-public-key PEM_FILE",
                        alg_name(alg)
                    )));
                };
                let pem = std::fs::read(path).map_err(|e| {
                    AuthError::Config(format!("cannot read {}: {e}", path.display()))
                })?;
                Authenticator::with_public_key_pem(alg, &pem, rules)
            }
        }
    }

    /// An HS256 authenticator with a shared secret (verifies and mints).
    pub fn hs256(secret: &[u8], rules: ClaimRules) -> Result<Authenticator, AuthError> {
        if secret.is_empty() {
            return Err(AuthError::Config("the jwt secret is empty".into()));
        }
        Ok(Authenticator::new(
            JwtAlg::Hs256,
            DecodingKey::from_secret(secret),
            Some(EncodingKey::from_secret(secret)),
            rules,
        ))
    }

    /// An RS256 / ES256 / EdDSA authenticator from a PEM public key (SPKI `PUBLIC KEY`, or
    /// PKCS#1 `RSA PUBLIC KEY` for RS256). Verifies only: it cannot mint.
    pub fn with_public_key_pem(
        alg: JwtAlg,
        pem: &[u8],
        rules: ClaimRules,
    ) -> Result<Authenticator, AuthError> {
        if pem.windows(7).any(|w| w == b"PRIVATE") {
            return Err(AuthError::Config(
                "--jwt-public-key holds a private key; give the public key only".into(),
            ));
        }
        let key = match alg {
            JwtAlg::Hs256 => {
                return Err(AuthError::Config(
                    "HS256 verifies with a secret, not a public key".into(),
                ));
            }
            JwtAlg::Rs256 => DecodingKey::from_rsa_pem(pem),
            JwtAlg::Es256 => DecodingKey::from_ec_pem(pem),
            JwtAlg::EdDsa => DecodingKey::from_ed_pem(pem),
        }
        .map_err(|e| {
            AuthError::Config(format!(
                "the public key is not a PEM {} key: {e}",
                alg_name(alg)
            ))
        })?;
        Ok(Authenticator::new(alg, key, None, rules))
    }

    fn new(
        alg: JwtAlg,
        decoding: DecodingKey,
        encoding: Option<EncodingKey>,
        rules: ClaimRules,
    ) -> Authenticator {
        let mut validation = Validation::new(jose_alg(alg));
        // Time, audience and required-claim checks happen in `Claims::from_payload` against the
        // injected clock; here jsonwebtoken only checks the algorithm list and the signature.
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.validate_aud = false;
        validation.required_spec_claims.clear();
        validation.leeway = 0;
        Authenticator {
            alg,
            decoding,
            encoding,
            validation,
            rules,
            generated_secret: false,
        }
    }

    /// The configured algorithm.
    pub fn algorithm(&self) -> JwtAlg {
        self.alg
    }

    /// Whether the HS256 secret was generated for this process (`--dev` without a secret), so
    /// the server can say in its log that only dev tokens will work.
    pub fn uses_generated_secret(&self) -> bool {
        self.generated_secret
    }

    /// Verifies `token` at `now_unix_secs` and returns its claims.
    ///
    /// Does not grant any room: pass the claims to [`super::authorize`].
    pub fn authenticate(&self, token: &str, now_unix_secs: u64) -> Result<Claims, AuthError> {
        if token.is_empty() {
            return Err(AuthError::MissingToken);
        }
        if token.len() > MAX_TOKEN_BYTES {
            return Err(AuthError::MalformedToken(format!(
                "longer than {MAX_TOKEN_BYTES} bytes"
            )));
        }
        let mut parts = token.split('.');
        let (Some(header), Some(_payload), Some(_signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(AuthError::MalformedToken(
                "expected three base64url parts separated by dots".into(),
            ));
        };
        self.check_header(header)?;
        let data = jsonwebtoken::decode::<Value>(token, &self.decoding, &self.validation)
            .map_err(|e| self.map_jwt_error(e.into_kind()))?;
        Claims::from_payload(&data.claims, &self.rules, now_unix_secs)
    }

    /// Reads the header ourselves so the refusal says which algorithm was offered, and so an
    /// unknown algorithm (`none`) is named rather than reported as a JSON error.
    fn check_header(&self, header: &str) -> Result<(), AuthError> {
        let bytes = URL_SAFE_NO_PAD
            .decode(header)
            .map_err(|_| AuthError::MalformedToken("the header is not base64url".into()))?;
        let header: Value = serde_json::from_slice(&bytes)
            .map_err(|_| AuthError::MalformedToken("the header is not JSON".into()))?;
        let Some(obj) = header.as_object() else {
            return Err(AuthError::MalformedToken(
                "the header is not a JSON object".into(),
            ));
        };
        let expected = alg_name(self.alg);
        match obj.get("alg").and_then(Value::as_str) {
            Some(alg) if alg == expected => {}
            Some(alg) => {
                return Err(AuthError::WrongAlgorithm {
                    got: truncate_for_detail(alg),
                    expected,
                });
            }
            None => {
                return Err(AuthError::MalformedToken(
                    "the header has no alg string".into(),
                ));
            }
        }
        // RFC 7515 §4.1.11: extensions we do not understand must not be ignored.
        if obj.contains_key("crit") {
            return Err(AuthError::MalformedToken(
                "critical header extensions are not supported".into(),
            ));
        }
        Ok(())
    }

    fn map_jwt_error(&self, kind: ErrorKind) -> AuthError {
        match kind {
            ErrorKind::InvalidSignature => AuthError::BadSignature,
            ErrorKind::InvalidAlgorithm => AuthError::WrongAlgorithm {
                got: "another algorithm".into(),
                expected: alg_name(self.alg),
            },
            ErrorKind::Base64(_) => {
                AuthError::MalformedToken("a part is not valid base64url".into())
            }
            ErrorKind::Json(_) | ErrorKind::Utf8(_) => {
                AuthError::MalformedToken("the claims are not a JSON object".into())
            }
            // Key-shaped errors at verify time mean the signature cannot be checked with the
            // configured key (e.g. an ECDSA signature of the wrong length): a bad signature.
            ErrorKind::InvalidEcdsaKey
            | ErrorKind::InvalidEddsaKey
            | ErrorKind::InvalidRsaKey(_)
            | ErrorKind::InvalidKeyFormat => AuthError::BadSignature,
            _ => AuthError::MalformedToken("the token cannot be decoded".into()),
        }
    }
}

#[cfg(test)]
#[path = "verify_tests.rs"]
mod tests;
