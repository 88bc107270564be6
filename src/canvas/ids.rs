//! Shape ids chosen by a model: normalisation, uniqueness with a rename map that later
//! references follow (`box` → `box-1`), and existence checks.
//!
//! Owns the [`IdRenames`] map of one request; the set of existing ids is passed in, so this
//! module never reads the document itself.

use std::collections::HashMap;

use super::CanvasError;
use crate::ids::ShapeId;

/// Longest id accepted (in characters).
pub const MAX_ID_LEN: usize = crate::ids::MAX_SHAPE_ID;

/// The renames made while sanitizing one request's actions: original id → id actually used.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IdRenames {
    map: HashMap<ShapeId, ShapeId>,
}

impl IdRenames {
    /// The id a reference to `id` should use now.
    pub fn resolve(&self, id: &ShapeId) -> ShapeId {
        self.map.get(id).cloned().unwrap_or_else(|| id.clone())
    }

    /// Records that `from` was renamed to `to`.
    pub fn insert(&mut self, from: &ShapeId, to: &ShapeId) {
        self.map.insert(from.clone(), to.clone());
    }

    /// True if no rename happened.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// Trims an id, strips a tldraw-style `shape:` prefix, and rejects empty, overlong or
/// control-character ids ([`ShapeId::parse`], as text).
pub fn normalize_id(raw: &str) -> Result<String, CanvasError> {
    parse_id(raw).map(ShapeId::into_string)
}

/// [`ShapeId::parse`] with the canvas module's error.
pub fn parse_id(raw: &str) -> Result<ShapeId, CanvasError> {
    ShapeId::parse(raw).map_err(|e| CanvasError::InvalidId(e.0))
}

/// The id a new shape should get: `id` itself if free, else the first free `id-N`. A rename is
/// recorded in `renames`, so later references to `id` in the same request follow it.
pub fn ensure_shape_id_is_unique(
    raw: &str,
    exists: impl Fn(&str) -> bool,
    renames: &mut IdRenames,
) -> Result<ShapeId, CanvasError> {
    let id = parse_id(raw)?;
    if !exists(id.as_str()) {
        return Ok(id);
    }
    let mut n = 1u64;
    loop {
        let candidate = id.with_suffix(n);
        if !exists(candidate.as_str()) {
            renames.insert(&id, &candidate);
            return Ok(candidate);
        }
        n += 1;
    }
}

/// The id an existing shape is referred to by, after following renames; `None` if there is no
/// such shape (the caller drops the reference and tells the model).
pub fn ensure_shape_id_exists(
    raw: &str,
    exists: impl Fn(&str) -> bool,
    renames: &IdRenames,
) -> Option<ShapeId> {
    let resolved = renames.resolve(&parse_id(raw).ok()?);
    exists(resolved.as_str()).then_some(resolved)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collisions_are_renamed_and_followed() {
        let taken = ["box", "box-1"];
        let exists = |id: &str| taken.contains(&id);
        let mut renames = IdRenames::default();
        assert_eq!(
            ensure_shape_id_is_unique("box", exists, &mut renames).map(ShapeId::into_string),
            Ok("box-2".into())
        );
        let id = |s: &str| ShapeId::parse(s).ok();
        assert_eq!(id("box").map(|b| renames.resolve(&b)), id("box-2"));
        let exists_after = |id: &str| taken.contains(&id) || id == "box-2";
        assert_eq!(
            ensure_shape_id_exists("box", exists_after, &renames),
            id("box-2")
        );
        assert_eq!(
            ensure_shape_id_exists("ghost", exists_after, &renames),
            None
        );
    }

    #[test]
    fn bad_ids_are_rejected() {
        assert!(normalize_id("").is_err());
        assert!(normalize_id("  ").is_err());
        assert!(normalize_id("a\u{0}b").is_err());
        assert!(normalize_id(&"x".repeat(500)).is_err());
        assert_eq!(normalize_id("shape:box1"), Ok("box1".into()));
    }
}
