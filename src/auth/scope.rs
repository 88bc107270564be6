//! Scopes of a token: `read`, `write`, `fairies`, `admin`, and how they imply each other.
//!
//! Owns: parsing the `scope` claim (an OAuth space-separated string, or a JSON array of the same
//! words) and the implication rules (`write` ⇒ `read`; `admin` ⇒ everything). Must not know
//! about rooms or tokens.

use std::fmt;
use std::str::FromStr;

use super::AuthError;

/// One scope word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Receive the document and awareness of a room.
    Read,
    /// Send document updates (implies `read`).
    Write,
    /// Invite, prompt and dismiss fairies.
    Fairies,
    /// Everything above.
    Admin,
}

impl Scope {
    /// The word used in tokens.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Write => "write",
            Scope::Fairies => "fairies",
            Scope::Admin => "admin",
        }
    }

    /// The scope for a word, or `None` for words this server does not know.
    pub fn from_word(word: &str) -> Option<Scope> {
        match word {
            "read" => Some(Scope::Read),
            "write" => Some(Scope::Write),
            "fairies" => Some(Scope::Fairies),
            "admin" => Some(Scope::Admin),
            _ => None,
        }
    }
}

/// The effective set of scopes of a token, with implications already applied, so callers ask
/// `scopes.write` instead of re-deriving the rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Scopes {
    /// May receive the room (granted by `read`, `write` or `admin`).
    pub read: bool,
    /// May change the document (granted by `write` or `admin`).
    pub write: bool,
    /// May drive fairies (granted by `fairies` or `admin`).
    pub fairies: bool,
    /// Administrator (granted by `admin`).
    pub admin: bool,
}

impl Scopes {
    /// Adds one scope and what it implies.
    pub fn grant(&mut self, scope: Scope) {
        match scope {
            Scope::Read => self.read = true,
            Scope::Write => {
                self.write = true;
                self.read = true;
            }
            Scope::Fairies => self.fairies = true,
            Scope::Admin => *self = Scopes::all(),
        }
    }

    /// Every scope (what `admin` grants).
    pub fn all() -> Scopes {
        Scopes {
            read: true,
            write: true,
            fairies: true,
            admin: true,
        }
    }

    /// Whether `scope` is granted.
    pub fn has(&self, scope: Scope) -> bool {
        match scope {
            Scope::Read => self.read,
            Scope::Write => self.write,
            Scope::Fairies => self.fairies,
            Scope::Admin => self.admin,
        }
    }

    /// Lenient parse of a verified token's words: unknown words are ignored (another service
    /// may share the issuer and add its own scopes), as OAuth resource servers do.
    pub fn from_words<'a>(words: impl IntoIterator<Item = &'a str>) -> Scopes {
        let mut scopes = Scopes::default();
        for scope in words.into_iter().filter_map(Scope::from_word) {
            scopes.grant(scope);
        }
        scopes
    }

    /// Parses the `scope` claim: a space-separated string or an array of strings.
    pub(crate) fn from_claim(value: &serde_json::Value) -> Result<Scopes, AuthError> {
        match value {
            serde_json::Value::String(text) => Ok(Scopes::from_words(text.split_whitespace())),
            serde_json::Value::Array(items) => {
                let mut words = Vec::with_capacity(items.len());
                for item in items {
                    match item.as_str() {
                        Some(word) => words.push(word),
                        None => {
                            return Err(AuthError::InvalidClaim {
                                claim: "scope",
                                reason: "array items must be strings".into(),
                            });
                        }
                    }
                }
                Ok(Scopes::from_words(words))
            }
            _ => Err(AuthError::InvalidClaim {
                claim: "scope",
                reason: "expected a space-separated string or an array of strings".into(),
            }),
        }
    }

    /// The space-separated words for this set, as minted into tokens. Implied scopes are
    /// written out (`write` gives `read write`) so other consumers of the token need not know
    /// this server's implication rules.
    pub fn to_claim_string(&self) -> String {
        let flags = [
            (self.read, Scope::Read),
            (self.write, Scope::Write),
            (self.fairies, Scope::Fairies),
            (self.admin, Scope::Admin),
        ];
        let words: Vec<&str> = flags
            .iter()
            .filter(|(on, _)| *on)
            .map(|(_, scope)| scope.as_str())
            .collect();
        words.join(" ")
    }
}

impl fmt::Display for Scopes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_claim_string())
    }
}

/// Strict parse for minting (CLI `--scope`, [`super::MintRequest`]): unknown words are an
/// error, so a typo like `wirte` is caught before a useless token is handed out. Words may be
/// separated by spaces or commas; at least one is required.
impl FromStr for Scopes {
    type Err = AuthError;

    fn from_str(text: &str) -> Result<Scopes, AuthError> {
        let mut scopes = Scopes::default();
        let mut any = false;
        for word in text.split([' ', ',']).filter(|w| !w.is_empty()) {
            let scope = Scope::from_word(word).ok_or_else(|| {
                AuthError::InvalidRequest(format!(
                    "unknown scope {:?} (expected read, write, fairies or admin)",
                    super::error::truncate_for_detail(word)
                ))
            })?;
            scopes.grant(scope);
            any = true;
        }
        if any {
            Ok(scopes)
        } else {
            Err(AuthError::InvalidRequest("scope is empty".into()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn write_implies_read_and_admin_implies_all() {
        let s = Scopes::from_words(["write"]);
        assert!(s.read && s.write && !s.fairies && !s.admin);
        assert_eq!(Scopes::from_words(["admin"]), Scopes::all());
        let f = Scopes::from_words(["fairies"]);
        assert!(f.fairies && !f.read);
    }

    #[test]
    fn claim_string_and_array_forms_agree() {
        let a = Scopes::from_claim(&json!("read fairies")).ok();
        let b = Scopes::from_claim(&json!(["read", "fairies"])).ok();
        assert_eq!(a, b);
        assert!(a.is_some_and(|s| s.read && s.fairies && !s.write));
    }

    #[test]
    fn unknown_words_are_ignored_when_verifying() {
        let s = Scopes::from_claim(&json!("openid read profile")).ok();
        assert_eq!(s, Some(Scopes::from_words(["read"])));
    }

    #[test]
    fn wrong_claim_types_are_invalid() {
        assert!(Scopes::from_claim(&json!(3)).is_err());
        assert!(Scopes::from_claim(&json!(["read", 1])).is_err());
        assert!(Scopes::from_claim(&json!({"read": true})).is_err());
    }

    #[test]
    fn strict_parse_rejects_typos_and_empty() {
        assert!("read wirte".parse::<Scopes>().is_err());
        assert!("".parse::<Scopes>().is_err());
        assert!(" , ".parse::<Scopes>().is_err());
        assert_eq!(
            "read,write".parse::<Scopes>().ok(),
            Some(Scopes::from_words(["write"]))
        );
    }

    #[test]
    fn claim_strings_spell_out_implied_scopes() {
        assert_eq!(
            Scopes::from_words(["write"]).to_claim_string(),
            "read write"
        );
        assert_eq!(
            Scopes::from_words(["admin"]).to_claim_string(),
            "read write fairies admin"
        );
        assert_eq!(Scopes::default().to_claim_string(), "");
    }

    #[test]
    fn claim_string_round_trips() {
        for words in [
            vec!["read"],
            vec!["write"],
            vec!["fairies"],
            vec!["read", "fairies"],
            vec!["write", "fairies"],
            vec!["admin"],
        ] {
            let scopes = Scopes::from_words(words.iter().copied());
            let again = scopes.to_claim_string().parse::<Scopes>().ok();
            assert_eq!(again, Some(scopes), "{words:?}");
        }
    }
}
