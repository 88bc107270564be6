//! Plain validated identifiers shared across modules: a leaf (it imports nothing of the crate),
//! so that the store, the rooms, the agent and the HTTP edge can all name a room, a fairy, a
//! request, a project or a shape without depending on each other. Owns only parsing, making and printing
//! ids; never what they identify.
//! Every user names them here (`pubsub` still reaches [`RoomName`] through `crate::room`).

use std::fmt;

use rand::Rng;
use serde::{Deserialize, Serialize};

/// Longest room name accepted.
pub const MAX_ROOM_NAME: usize = 128;

/// A room name: 1–128 characters of `[A-Za-z0-9._-]` (docs/protocol.md). Constructing one is the only
/// way a name reaches the room registry or the store.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RoomName(String);

/// A refused room name.
#[derive(Debug, thiserror::Error)]
#[error("room names are 1-128 characters of A-Z a-z 0-9 . _ -")]
pub struct InvalidRoomName;

impl RoomName {
    /// Validates a room name.
    pub fn parse(name: &str) -> Result<Self, InvalidRoomName> {
        let ok = !name.is_empty()
            && name.len() <= MAX_ROOM_NAME
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
        if ok {
            Ok(RoomName(name.to_owned()))
        } else {
            Err(InvalidRoomName)
        }
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RoomName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Longest fairy, request or project id accepted.
pub const MAX_PLAIN_ID: usize = 64;

/// True for 1–64 characters of `[A-Za-z0-9_-]`: safe in origins (`fairy:ID`), URLs and
/// document keys (fairy, project and request ids).
pub fn is_plain_id(raw: &str) -> bool {
    !raw.is_empty()
        && raw.len() <= MAX_PLAIN_ID
        && raw
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// `PREFIX-` and `digits` random hex digits (at most 16).
fn random_hex(prefix: &str, digits: usize) -> String {
    let n: u64 = rand::rng().random::<u64>();
    let hex = format!("{n:016x}");
    format!("{prefix}-{}", &hex[16 - digits.min(16)..])
}

/// `PREFIX-` and 10 random hex digits (the server's fairy and project ids).
pub fn random_id(prefix: &str) -> String {
    random_hex(prefix, 10)
}

/// A plain-id newtype over a `String`: `parse` (validated, the refusal quoting at most 80
/// characters of the input), `as_str`, `Display`, and serde as the bare string, validated on
/// the way in (`TryFrom<String>`).
macro_rules! plain_id {
    ($(#[$doc:meta])* $id:ident, $(#[$edoc:meta])* $error:ident, $message:literal) => {
        $(#[$doc])*
        #[derive(
            Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
            utoipa::ToSchema,
        )]
        #[serde(try_from = "String", into = "String")]
        pub struct $id(String);

        $(#[$edoc])*
        #[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
        #[error($message)]
        pub struct $error(pub String);

        impl $id {
            /// Validates an id (see [`is_plain_id`]).
            pub fn parse(raw: &str) -> Result<Self, $error> {
                if is_plain_id(raw) {
                    Ok($id(raw.to_owned()))
                } else {
                    Err($error(raw.chars().take(80).collect()))
                }
            }

            /// The id as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<String> for $id {
            type Error = $error;
            fn try_from(value: String) -> Result<Self, Self::Error> {
                if is_plain_id(&value) {
                    Ok($id(value))
                } else {
                    Err($error(value.chars().take(80).collect()))
                }
            }
        }

        impl std::str::FromStr for $id {
            type Err = $error;
            fn from_str(raw: &str) -> Result<Self, Self::Err> {
                $id::parse(raw)
            }
        }

        impl From<$id> for String {
            fn from(id: $id) -> String {
                id.0
            }
        }

        impl AsRef<str> for $id {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $id {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

plain_id!(
    /// A fairy's id: 1–64 characters of `[A-Za-z0-9_-]` (`f-` and 10 hex digits when the server
    /// makes one), safe in origins (`fairy:ID`) and URLs.
    FairyId,
    /// A refused fairy id.
    InvalidFairyId,
    "invalid fairy id: {0}"
);

impl FairyId {
    /// A fresh random id (`f-` + 10 hex digits).
    pub fn random() -> Self {
        FairyId(random_id("f"))
    }
}

plain_id!(
    /// The id of one fairy request (`r-` + 12 hex digits when the server makes it; what
    /// `…/requests/{requestId}/revert` takes).
    RequestId,
    /// A refused request id.
    InvalidRequestId,
    "invalid request id '{0}'"
);

impl RequestId {
    /// A fresh random id (`r-` + 12 hex digits).
    pub fn random() -> Self {
        RequestId(random_hex("r", 12))
    }
}

plain_id!(
    /// A project's id: `p-` and 10 hex digits when the server makes one; 1–64 characters of
    /// `[A-Za-z0-9_-]` when read from a request.
    ProjectId,
    /// A refused project id.
    InvalidProjectId,
    "invalid project id: {0}"
);

impl ProjectId {
    /// A fresh random id (`p-` + 10 hex digits).
    pub fn random() -> Self {
        ProjectId(random_id("p"))
    }
}

plain_id!(
    /// A suggestion's id in the `suggestions` root (`s-` + 12 hex digits when the server makes
    /// one; what `/rooms/{room}/suggestions/{id}/accept` takes).
    SuggestionId,
    /// A refused suggestion id.
    InvalidSuggestionId,
    "invalid suggestion id '{0}'"
);

impl SuggestionId {
    /// A fresh random id (`s-` + 12 hex digits).
    pub fn random() -> Self {
        SuggestionId(random_hex("s", 12))
    }
}

/// Longest shape id accepted (in characters) before a collision suffix (`-1`, `-2`…).
pub const MAX_SHAPE_ID: usize = 128;

/// A shape id as the document keys it: trimmed, without a tldraw-style `shape:` prefix, 1–128
/// characters and no control character (docs/document-schema.md). The fairy actions' typed
/// arguments hold these, so an id an action applies to has been normalised once, when the
/// model's JSON was parsed.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ShapeId(String);

/// A refused shape id (empty, too long or with a control character); holds the first
/// [`MAX_SHAPE_ID`] characters of what was given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid shape id '{0}'")]
pub struct InvalidShapeId(pub String);

impl ShapeId {
    /// Normalises and validates a shape id written by a person or a model.
    pub fn parse(raw: &str) -> Result<Self, InvalidShapeId> {
        // Every leading `shape:` goes, so that normalising is idempotent: `shape:shape:x` is
        // `x`, as `shape:x` and `x` are (one stripped prefix stored `shape:x`, which an update
        // naming `shape:x` then missed).
        let mut id = raw.trim();
        while let Some(rest) = id.strip_prefix("shape:") {
            id = rest;
        }
        if id.is_empty() || id.chars().count() > MAX_SHAPE_ID || id.chars().any(char::is_control) {
            return Err(InvalidShapeId(raw.chars().take(MAX_SHAPE_ID).collect()));
        }
        Ok(ShapeId(id.to_owned()))
    }

    /// This id with a collision suffix (`box` → `box-2`); the only way an id may grow past
    /// [`MAX_SHAPE_ID`], by the suffix.
    pub fn with_suffix(&self, n: u64) -> Self {
        ShapeId(format!("{}-{n}", self.0))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The id as an owned string (what the document's shape records hold).
    pub fn into_string(self) -> String {
        self.0
    }
}

impl fmt::Display for ShapeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl PartialEq<str> for ShapeId {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_only_the_spec_alphabet() {
        for ok in ["a", "team-1", "A.b_c-9", &"x".repeat(128)] {
            assert!(RoomName::parse(ok).is_ok(), "{ok}");
        }
        for bad in ["", "a b", "a/b", "é", "..%2f", &"x".repeat(129), "a\0"] {
            assert!(RoomName::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn plain_ids_parse_only_the_url_safe_alphabet() {
        for ok in ["f-1_a", "A", &"x".repeat(64)] {
            assert!(FairyId::parse(ok).is_ok(), "{ok}");
            assert!(RequestId::parse(ok).is_ok(), "{ok}");
            assert!(ProjectId::parse(ok).is_ok(), "{ok}");
        }
        for bad in ["", "a:b", "a/b", "a b", "é", &"x".repeat(65)] {
            assert!(FairyId::parse(bad).is_err(), "{bad:?}");
            assert!(RequestId::parse(bad).is_err(), "{bad:?}");
            assert!(ProjectId::parse(bad).is_err(), "{bad:?}");
        }
        let long = "/".repeat(200);
        let refused = FairyId::parse(&long).unwrap_err();
        assert_eq!(refused.0.chars().count(), 80);
        assert_eq!(
            refused.to_string(),
            format!("invalid fairy id: {}", "/".repeat(80))
        );
    }

    #[test]
    fn random_ids_have_their_prefix_and_parse_back() {
        let f = FairyId::random();
        assert!(
            f.as_str().starts_with("f-") && f.as_str().len() == 12,
            "{f}"
        );
        let r = RequestId::random();
        assert!(
            r.as_str().starts_with("r-") && r.as_str().len() == 14,
            "{r}"
        );
        let p = ProjectId::random();
        assert!(
            p.as_str().starts_with("p-") && p.as_str().len() == 12,
            "{p}"
        );
        assert_eq!(FairyId::parse(f.as_str()).ok(), Some(f.clone()));
        assert_eq!(f.to_string(), f.as_str());
    }

    #[test]
    fn serde_is_the_bare_string_and_validates() {
        let id = RequestId::parse("r-1").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(serde_json::to_string(&id).ok().as_deref(), Some("\"r-1\""));
        let back: Result<RequestId, _> = serde_json::from_str("\"r-1\"");
        assert_eq!(back.ok(), Some(id));
        assert!(serde_json::from_str::<ProjectId>("\"a/b\"").is_err());
        assert!(serde_json::from_str::<FairyId>("7").is_err());
    }

    #[test]
    fn shape_ids_are_normalised_once() {
        assert_eq!(
            ShapeId::parse(" shape:box1 ").map(|i| i.into_string()),
            Ok("box1".into())
        );
        for bad in ["", "  ", "shape:", "a\u{0}b", &"x".repeat(129)] {
            assert!(ShapeId::parse(bad).is_err(), "{bad:?}");
        }
        let id = ShapeId::parse(&"x".repeat(128));
        assert_eq!(id.map(|i| i.with_suffix(1).as_str().len()), Ok(130));
        // Idempotent: every leading prefix goes (issue 43), so the id stored for
        // `shape:shape:x` is the one `shape:x` and `x` name.
        for raw in ["shape:shape:x", "shape:x", "x", " shape:shape:shape:x"] {
            assert_eq!(
                ShapeId::parse(raw).map(|i| i.into_string()),
                Ok("x".into()),
                "{raw}"
            );
        }
        assert!(ShapeId::parse("shape:shape:").is_err());
    }
}
