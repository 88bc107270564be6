//! The viewport of the person who asked, which a fairy's prompt shows (docs/fairies.md "What a
//! fairy sees"; gathered with the rest of the prompt's inputs in the turn's
//! [`super::turn`]): from the awareness state `{user: {id}, viewport: {x, y, w, h}}` of one of
//! their own connections (no other peer can publish it for them). The hub reads it too, to
//! place a fairy it summons.
//!
//! Pure: reads the awareness states it is given.

use serde_json::Value;

use crate::canvas::geometry::Bounds;

/// The `viewport` of the awareness state whose `user.id` is `sub`, if one is published and
/// finite (several tabs of one person: the first found).
pub fn user_viewport<'a>(states: impl IntoIterator<Item = &'a Value>, sub: &str) -> Option<Bounds> {
    states.into_iter().find_map(|state| {
        if state.get("user")?.get("id")?.as_str()? != sub {
            return None;
        }
        let v = state.get("viewport")?;
        let n = |k: &str| v.get(k)?.as_f64().filter(|n| n.is_finite());
        Some(Bounds::new(n("x")?, n("y")?, n("w")?, n("h")?))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_askers_viewport_is_found_by_user_id() {
        let states = [
            json!({"fairy": {"id": "f"}}),
            json!({"user": {"id": "bob"}, "viewport": {"x": 1, "y": 2, "w": 3, "h": 4}}),
            json!({"user": {"id": "ann"}, "viewport": {"x": 10, "y": 20, "w": 300, "h": 200}}),
            json!({"user": {"id": "eve"}, "viewport": {"x": "no"}}),
        ];
        assert_eq!(
            user_viewport(&states, "ann"),
            Some(Bounds::new(10.0, 20.0, 300.0, 200.0))
        );
        assert_eq!(user_viewport(&states, "eve"), None);
        assert_eq!(user_viewport(&states, "zed"), None);
    }
}
