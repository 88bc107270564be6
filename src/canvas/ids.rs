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

/// The id a new shape should get: `id` itself if free, else a free `id-N`. A rename is
/// recorded in `renames`, so later references to `id` in the same request follow it.
///
/// `N` is found in O(log N) lookups: doubling until a free one, then halving back towards the
/// last taken one (a canvas where fairies drew `step1` hundreds of times made a one-by-one
/// search a tenth of a drawing fairy's work, once per streamed version). Usually that is the
/// first free `N`; where earlier ones were deleted it may be a later one.
pub fn ensure_shape_id_is_unique(
    raw: &str,
    exists: impl Fn(&str) -> bool,
    renames: &mut IdRenames,
) -> Result<ShapeId, CanvasError> {
    let id = parse_id(raw)?;
    if !exists(id.as_str()) {
        return Ok(id);
    }
    let taken = |n: u64| exists(id.with_suffix(n).as_str());
    // `low` is taken (0 stands for `id` itself), `high` is free.
    let (mut low, mut high) = (0u64, 1u64);
    while taken(high) {
        low = high;
        high = high.saturating_mul(2);
        if low == high {
            return Err(CanvasError::InvalidId(format!("no free id like '{id}'")));
        }
    }
    while high - low > 1 {
        let mid = low + (high - low) / 2;
        if taken(mid) {
            low = mid;
        } else {
            high = mid;
        }
    }
    let candidate = id.with_suffix(high);
    renames.insert(&id, &candidate);
    Ok(candidate)
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
    fn a_free_suffix_is_found_in_few_lookups() {
        // `step-1` … `step-300` taken: the next is `step-301`, after a handful of lookups.
        let lookups = std::cell::Cell::new(0);
        let exists = |id: &str| {
            lookups.set(lookups.get() + 1);
            id == "step"
                || id
                    .strip_prefix("step-")
                    .and_then(|n| n.parse::<u32>().ok())
                    .is_some_and(|n| (1..=300).contains(&n))
        };
        let mut renames = IdRenames::default();
        let got = ensure_shape_id_is_unique("step", exists, &mut renames);
        assert_eq!(got.map(ShapeId::into_string), Ok("step-301".into()));
        assert!(lookups.get() <= 20, "{} lookups", lookups.get());
        // With holes, any free suffix will do.
        let holes = |id: &str| ["a", "a-1", "a-3"].contains(&id);
        let got = ensure_shape_id_is_unique("a", holes, &mut renames).map(ShapeId::into_string);
        assert!(got.is_ok_and(|g| g == "a-2" || g == "a-4"));
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
