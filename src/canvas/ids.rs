//! Shape ids chosen by a model: normalisation, uniqueness with a rename map that later
//! references follow (`box` → `box-1`), and existence checks.
//!
//! Owns the [`IdRenames`] map of one request; the set of existing ids is passed in, so this
//! module never reads the document itself.

use std::collections::HashMap;

use super::CanvasError;

/// Longest id accepted (in characters).
pub const MAX_ID_LEN: usize = 128;

/// The renames made while sanitizing one request's actions: original id → id actually used.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IdRenames {
    map: HashMap<String, String>,
}

impl IdRenames {
    /// The id a reference to `id` should use now.
    pub fn resolve(&self, id: &str) -> String {
        self.map.get(id).cloned().unwrap_or_else(|| id.to_owned())
    }

    /// Records that `from` was renamed to `to`.
    pub fn insert(&mut self, from: &str, to: &str) {
        self.map.insert(from.to_owned(), to.to_owned());
    }

    /// True if no rename happened.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// Trims an id, strips a tldraw-style `shape:` prefix, and rejects empty, overlong or
/// control-character ids.
pub fn normalize_id(raw: &str) -> Result<String, CanvasError> {
    let trimmed = raw.trim();
    let id = trimmed.strip_prefix("shape:").unwrap_or(trimmed);
    if id.is_empty() || id.chars().count() > MAX_ID_LEN || id.chars().any(char::is_control) {
        return Err(CanvasError::InvalidId(
            raw.chars().take(MAX_ID_LEN).collect(),
        ));
    }
    Ok(id.to_owned())
}

/// The id a new shape should get: `id` itself if free, else the first free `id-N`. A rename is
/// recorded in `renames`, so later references to `id` in the same request follow it.
pub fn ensure_shape_id_is_unique(
    raw: &str,
    exists: impl Fn(&str) -> bool,
    renames: &mut IdRenames,
) -> Result<String, CanvasError> {
    let id = normalize_id(raw)?;
    if !exists(&id) {
        return Ok(id);
    }
    let mut n = 1u64;
    loop {
        let candidate = format!("{id}-{n}");
        if !exists(&candidate) {
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
) -> Option<String> {
    let id = normalize_id(raw).ok()?;
    let resolved = renames.resolve(&id);
    exists(&resolved).then_some(resolved)
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
            ensure_shape_id_is_unique("box", exists, &mut renames),
            Ok("box-2".into())
        );
        assert_eq!(renames.resolve("box"), "box-2");
        let exists_after = |id: &str| taken.contains(&id) || id == "box-2";
        assert_eq!(
            ensure_shape_id_exists("box", exists_after, &renames),
            Some("box-2".into())
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
