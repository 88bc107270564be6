//! `fairyring token`: mint an HS256 token from the command line (operators, scripts, demo).
//!
//! Owns: the subcommand's flags ([`TokenArgs`]) and TTL parsing (`30s`, `15m`, `1h`, `7d`).
//! Must not print anything (`main` prints the token) nor read the clock (`now` is passed in).

use std::fmt;
use std::time::Duration;

use clap::Args;

use super::AuthError;
use super::claims::ClaimRules;
use super::mint::MintRequest;
use super::scope::Scopes;
use super::verify::Authenticator;

/// Flags of `fairyring token`.
#[derive(Clone, Args)]
pub struct TokenArgs {
    /// Subject (user id) of the token.
    #[arg(long)]
    pub sub: String,

    /// Comma-separated room names or `*` globs, e.g. `a,team-*` (or `*` for every room).
    #[arg(long)]
    pub rooms: String,

    /// Space- or comma-separated scopes: read, write, fairies, admin.
    #[arg(long, default_value = "read write")]
    pub scope: Scopes,

    /// Lifetime: a number with a unit s, m, h or d (e.g. `30s`, `15m`, `1h`, `7d`).
    #[arg(long, default_value = "1h", value_parser = parse_ttl)]
    pub ttl: Duration,

    /// Display name carried in the token.
    #[arg(long)]
    pub name: Option<String>,

    /// HS256 secret to sign with (the server's `--jwt-secret`).
    #[arg(long, env = "FAIRYRING_JWT_SECRET", hide_env_values = true)]
    pub jwt_secret: String,

    /// `iss` to put in the token (the server's `--jwt-issuer`, when it checks one).
    #[arg(long, env = "FAIRYRING_JWT_ISSUER")]
    pub jwt_issuer: Option<String>,

    /// `aud` to put in the token (the server's `--jwt-audience`, when it checks one).
    #[arg(long, env = "FAIRYRING_JWT_AUDIENCE")]
    pub jwt_audience: Option<String>,
}

impl fmt::Debug for TokenArgs {
    // Manual: never print the secret.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenArgs")
            .field("sub", &self.sub)
            .field("rooms", &self.rooms)
            .field("scope", &self.scope)
            .field("ttl", &self.ttl)
            .field("name", &self.name)
            .field("jwt_issuer", &self.jwt_issuer)
            .field("jwt_audience", &self.jwt_audience)
            .finish_non_exhaustive()
    }
}

/// Mints the token that `fairyring token` prints, valid from `now`.
pub fn mint_from_args(args: &TokenArgs, now: u64) -> Result<String, AuthError> {
    let rules = ClaimRules {
        issuer: args.jwt_issuer.clone(),
        audience: args.jwt_audience.clone(),
        leeway: 0,
    };
    let auth = Authenticator::hs256(args.jwt_secret.as_bytes(), rules)?;
    let rooms = args
        .rooms
        .split(',')
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .map(str::to_owned)
        .collect();
    auth.mint(
        MintRequest {
            sub: args.sub.clone(),
            name: args.name.clone(),
            rooms,
            scope: args.scope,
            ttl: args.ttl,
        },
        now,
    )
}

/// Parses a TTL: digits then one unit `s`, `m`, `h` or `d` (bare digits are seconds); at least
/// one second, no overflow.
pub fn parse_ttl(text: &str) -> Result<Duration, AuthError> {
    let text = text.trim();
    let bad = || {
        AuthError::InvalidRequest(format!(
            "ttl {:?} is not like 30s, 15m, 1h or 7d",
            super::error::truncate_for_detail(text)
        ))
    };
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let count: u64 = digits.parse().map_err(|_| bad())?;
    let unit_secs: u64 = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 60 * 60,
        "d" => 24 * 60 * 60,
        _ => return Err(bad()),
    };
    let secs = count
        .checked_mul(unit_secs)
        .ok_or_else(|| AuthError::InvalidRequest("ttl is too long".into()))?;
    if secs == 0 {
        return Err(AuthError::InvalidRequest("ttl must be at least 1s".into()));
    }
    Ok(Duration::from_secs(secs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use proptest::prelude::*;

    #[derive(Debug, Parser)]
    struct Wrapper {
        #[command(flatten)]
        args: TokenArgs,
    }

    #[test]
    fn ttl_units() {
        assert_eq!(parse_ttl("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_ttl("15m"), Ok(Duration::from_secs(900)));
        assert_eq!(parse_ttl("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_ttl("7d"), Ok(Duration::from_secs(604_800)));
        assert_eq!(parse_ttl("90"), Ok(Duration::from_secs(90)));
        for bad in [
            "",
            "h",
            "0s",
            "1x",
            "-1h",
            "1.5h",
            "1 h",
            "1hh",
            "99999999999999999999d",
        ] {
            assert!(parse_ttl(bad).is_err(), "{bad}");
        }
        assert!(parse_ttl("999999999999999d").is_err(), "overflow");
    }

    proptest! {
        #[test]
        fn ttl_parse_never_panics(text in any::<String>()) {
            let _ = parse_ttl(&text);
        }

        #[test]
        fn ttl_round_trips(n in 1u64..1_000_000, unit in prop::sample::select(vec![("s", 1u64), ("m", 60), ("h", 3600), ("d", 86400)])) {
            prop_assert_eq!(parse_ttl(&format!("{n}{}", unit.0)), Ok(Duration::from_secs(n * unit.1)));
        }
    }

    #[test]
    fn cli_mints_a_verifiable_token() {
        let parsed = Wrapper::try_parse_from([
            "token",
            "--sub",
            "ops",
            "--rooms",
            "a, team-*",
            "--scope",
            "read write",
            "--ttl",
            "1h",
            "--name",
            "Ops",
            "--jwt-secret",
            "s3cret",
        ]);
        let Ok(Wrapper { args }) = parsed else {
            panic!("{parsed:?}");
        };
        let now = 1_800_000_000;
        let token = mint_from_args(&args, now);
        let auth = Authenticator::hs256(b"s3cret", ClaimRules::default());
        let claims = auth.and_then(|a| token.and_then(|t| a.authenticate(&t, now)));
        let Ok(claims) = claims else {
            panic!("{claims:?}");
        };
        assert_eq!(claims.sub, "ops");
        assert_eq!(claims.exp, now + 3600);
        assert!(claims.allows_room("team-x") && claims.allows_room("a"));
        assert!(claims.scopes.write);
        assert!(!format!("{args:?}").contains("s3cret"));
    }

    #[test]
    fn cli_rejects_typos_at_parse_time() {
        let base = ["token", "--sub", "u", "--rooms", "a", "--jwt-secret", "s"];
        let with = |extra: &[&'static str]| {
            let mut argv: Vec<&str> = base.to_vec();
            argv.extend_from_slice(extra);
            Wrapper::try_parse_from(argv).is_ok()
        };
        assert!(with(&[]));
        assert!(!with(&["--scope", "wirte"]));
        assert!(!with(&["--ttl", "forever"]));
    }
}
