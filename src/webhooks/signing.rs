//! Webhook signatures (docs/webhooks.md "Verifying a signature"): the header
//! `fairyring-signature: t=UNIX_SECONDS,v1=HEX`, `HEX` the HMAC-SHA256 of `"{t}.{raw body}"`
//! under `--webhook-secret` (the scheme of Stripe and Standard Webhooks).
//!
//! Owns signing and its checker (for receivers written in Rust and for the tests). Pure: no
//! I/O, no clock (times are passed in).

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// The header carrying the signature.
pub const SIGNATURE_HEADER: &str = "fairyring-signature";
/// The header carrying the event's id (the same on every attempt).
pub const EVENT_ID_HEADER: &str = "fairyring-event-id";

/// Why a signature header was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// The header is not `t=…,v1=…`.
    #[error("malformed signature header")]
    Malformed,
    /// Its time is further from now than the tolerance (a replay, or a clock far off).
    #[error("signature timestamp outside the tolerance")]
    Stale,
    /// No `v1` signature matches the body.
    #[error("signature does not match")]
    Mismatch,
}

fn mac(secret: &[u8], t: u64, body: &[u8]) -> Hmac<Sha256> {
    // HMAC takes keys of any length: `new_from_slice` cannot fail for it.
    let mut mac = match <Hmac<Sha256> as KeyInit>::new_from_slice(secret) {
        Ok(mac) => mac,
        Err(_) => unreachable!("HMAC accepts keys of any length"),
    };
    mac.update(t.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    mac
}

/// The `fairyring-signature` header of `body` sent at `t` (Unix seconds).
pub fn sign(secret: &[u8], t: u64, body: &[u8]) -> String {
    let code = mac(secret, t, body).finalize().into_bytes();
    format!("t={t},v1={}", hex::encode(code))
}

/// Checks a `fairyring-signature` header against `body`: one of its `v1` values must be the
/// HMAC of `"{t}.{body}"` (compared in constant time) and `t` within `tolerance_secs` of `now`
/// (Unix seconds).
pub fn verify(
    secret: &[u8],
    header: &str,
    body: &[u8],
    now: u64,
    tolerance_secs: u64,
) -> Result<(), SignatureError> {
    let mut t = None;
    let mut signatures = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", value)) => {
                t = Some(
                    value
                        .parse::<u64>()
                        .map_err(|_| SignatureError::Malformed)?,
                )
            }
            Some(("v1", value)) => signatures.push(value),
            _ => {}
        }
    }
    let t = t.ok_or(SignatureError::Malformed)?;
    if signatures.is_empty() {
        return Err(SignatureError::Malformed);
    }
    if now.abs_diff(t) > tolerance_secs {
        return Err(SignatureError::Stale);
    }
    let expected = mac(secret, t, body);
    let matches = signatures.iter().any(|value| {
        hex::decode(value).is_ok_and(|code| expected.clone().verify_slice(&code).is_ok())
    });
    if matches {
        Ok(())
    } else {
        Err(SignatureError::Mismatch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_is_the_hmac_of_time_dot_body() {
        // Computed independently, with Python's hmac module:
        // hmac.new(b'whsec_test', b'1700000000.{"a":1}', hashlib.sha256).hexdigest()
        assert_eq!(
            sign(b"whsec_test", 1_700_000_000, br#"{"a":1}"#),
            "t=1700000000,v1=38877139021993b830af32feea6e18a8da83eb2f6e49ee50bd9e4cf4ca4d3789"
        );
    }

    #[test]
    fn verify_accepts_its_own_and_refuses_changes() {
        let body = br#"{"id":"evt_1","type":"room.updated"}"#;
        let header = sign(b"secret", 1_000, body);
        assert_eq!(verify(b"secret", &header, body, 1_010, 300), Ok(()));
        assert_eq!(
            verify(b"other", &header, body, 1_010, 300),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify(b"secret", &header, b"{}", 1_010, 300),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify(b"secret", &header, body, 2_000, 300),
            Err(SignatureError::Stale)
        );
        assert_eq!(
            verify(b"secret", "v1=00", body, 1_000, 300),
            Err(SignatureError::Malformed)
        );
        assert_eq!(
            verify(b"secret", "t=x,v1=00", body, 1_000, 300),
            Err(SignatureError::Malformed)
        );
        // A header with several v1 values (a rotated secret) matches on any.
        let rotated = format!("{header},v1=deadbeef");
        assert_eq!(verify(b"secret", &rotated, body, 1_000, 300), Ok(()));
    }
}
