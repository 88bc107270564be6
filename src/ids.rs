//! Plain validated identifiers shared across modules: a leaf (it imports nothing of the crate),
//! so that the store, the rooms, the agent and the HTTP edge can all name a room without
//! depending on each other. Owns only parsing and printing ids; never what they identify.
//! The old paths (`crate::room::RoomName`, `crate::room::InvalidRoomName`) are re-exports.

use std::fmt;

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
        let trimmed = raw.trim();
        let id = trimmed.strip_prefix("shape:").unwrap_or(trimmed);
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
    }
}
