//! Sanitization of fairy actions as a model writes them: duplicate ids, references to missing
//! shapes, numbers and booleans as strings, NaN/infinity, enormous coordinates, unknown shape
//! types and garbage. Each case has a clear outcome (applied with a note, or refused with a
//! message for the model); nothing panics and a refused action changes nothing.

use fairyring::agent::actions::{ActionCtx, ActionError, Registry};
use fairyring::canvas::Shape;
use fairyring::canvas::coerce::COORD_LIMIT;
use fairyring::canvas::shape::{list_shapes, read_shape};
use proptest::prelude::*;
use serde_json::{Value, json};
use yrs::{Doc, ReadTxn, StateVector, Transact};

fn doc() -> Doc {
    let doc = Doc::new();
    fairyring::canvas::init_schema(&doc, "system");
    doc
}

fn apply(doc: &Doc, ctx: &mut ActionCtx, action: Value) -> Result<Vec<String>, ActionError> {
    Registry::canvas().apply(doc, &action, ctx).map(|s| s.notes)
}

fn shape(doc: &Doc, id: &str) -> Option<Shape> {
    read_shape(&doc.transact(), id).ok().flatten()
}

fn state(doc: &Doc) -> Vec<u8> {
    doc.transact()
        .encode_state_as_update_v1(&StateVector::default())
}

#[test]
fn duplicate_ids_are_renamed_and_later_references_follow() {
    let doc = doc();
    let mut ctx = ActionCtx::new("f1");
    let create = |x: i32| json!({"_type": "create", "shape": {"_type": "rectangle", "shapeId": "box", "x": x, "y": 0}});
    assert_eq!(apply(&doc, &mut ctx, create(0)).map(|n| n.len()), Ok(0));
    let notes = apply(&doc, &mut ctx, create(100));
    assert!(
        matches!(&notes, Ok(n) if n.len() == 1 && n[0].contains("box-1")),
        "{notes:?}"
    );
    let arrow = json!({"_type": "create", "shape": {"_type": "arrow", "shapeId": "a", "x1": 0, "y1": 0, "x2": 1, "y2": 1, "toId": "box"}});
    assert!(apply(&doc, &mut ctx, arrow).is_ok());
    let text = format!("{:?}", shape(&doc, "a").map(|s| s.props));
    assert!(text.contains("to_id: Some(\"box-1\")"), "{text}");
}

#[test]
fn references_to_missing_shapes_are_dropped_or_refused() {
    let doc = doc();
    let mut ctx = ActionCtx::new("f1");
    let refused = apply(
        &doc,
        &mut ctx,
        json!({"_type": "move", "shapeId": "ghost", "x": 1, "y": 1}),
    );
    assert!(
        matches!(&refused, Err(ActionError::Invalid(m)) if m.contains("ghost")),
        "{refused:?}"
    );
    assert!(
        apply(
            &doc,
            &mut ctx,
            json!({"_type": "create", "shape": {"_type": "note", "shapeId": "n"}})
        )
        .is_ok()
    );
    let partial = apply(
        &doc,
        &mut ctx,
        json!({"_type": "bring-to-front", "shapeIds": ["ghost", "n", "n"]}),
    );
    assert!(matches!(&partial, Ok(n) if n.len() == 1), "{partial:?}");
}

#[test]
fn strings_are_coerced_to_numbers_and_booleans() {
    let doc = doc();
    let mut ctx = ActionCtx::new("f1");
    assert!(apply(&doc, &mut ctx, json!({"_type": "create", "shape": {"_type": "rectangle", "shapeId": "r", "x": "12", "y": " 7.5 ", "w": "40px", "h": 10}})).is_ok());
    let r = shape(&doc, "r");
    assert_eq!(r.as_ref().map(|s| (s.x, s.y)), Some((12.0, 7.5)));
    let pen = json!({"_type": "pen", "points": [{"x": "0", "y": "0"}, {"x": 10, "y": "10"}], "closed": "false", "style": "straight"});
    assert!(apply(&doc, &mut ctx, pen).is_ok());
    let closed = json!({"_type": "pen", "points": [{"x": 0, "y": 0}, {"x": 10, "y": 0}, {"x": 0, "y": 10}], "closed": "maybe"});
    assert!(
        apply(&doc, &mut ctx, closed).is_err(),
        "an unreadable boolean is refused"
    );
}

#[test]
fn non_finite_numbers_are_refused_and_change_nothing() {
    let doc = doc();
    let mut ctx = ActionCtx::new("f1");
    assert!(
        apply(
            &doc,
            &mut ctx,
            json!({"_type": "create", "shape": {"_type": "rectangle", "shapeId": "r"}})
        )
        .is_ok()
    );
    let before = state(&doc);
    for bad in ["NaN", "inf", "-Infinity", "1e999", "twelve"] {
        for action in [
            json!({"_type": "move", "shapeId": "r", "x": bad, "y": 0}),
            json!({"_type": "rotate", "shapeIds": ["r"], "degrees": bad}),
            json!({"_type": "resize", "shapeIds": ["r"], "scaleX": bad}),
            json!({"_type": "update", "update": {"shapeId": "r", "w": bad}}),
            json!({"_type": "create", "shape": {"_type": "ellipse", "shapeId": "e", "x": bad}}),
        ] {
            let r = apply(&doc, &mut ctx, action.clone());
            assert!(r.is_err(), "{action} was accepted");
        }
    }
    assert_eq!(state(&doc), before, "a refused action wrote something");
}

#[test]
fn enormous_coordinates_are_clamped() {
    let doc = doc();
    let mut ctx = ActionCtx::new("f1");
    assert!(apply(&doc, &mut ctx, json!({"_type": "create", "shape": {"_type": "rectangle", "shapeId": "r", "x": 1e300, "y": -1e300, "w": 1e300}})).is_ok());
    let r = shape(&doc, "r");
    assert_eq!(
        r.as_ref().map(|s| (s.x, s.y)),
        Some((COORD_LIMIT, -COORD_LIMIT))
    );
    assert!(
        apply(
            &doc,
            &mut ctx,
            json!({"_type": "resize", "shapeIds": ["r"], "scaleX": 1e300, "scaleY": 1e300})
        )
        .is_ok()
    );
    assert!(
        apply(
            &doc,
            &mut ctx,
            json!({"_type": "rotate", "shapeIds": ["r"], "degrees": 1e300})
        )
        .is_ok()
    );
    for s in list_shapes(&doc.transact()) {
        assert!(
            s.x.is_finite() && s.y.is_finite() && s.rotation.is_finite(),
            "{s:?}"
        );
    }
}

#[test]
fn unknown_types_and_garbage_have_clear_errors() {
    let doc = doc();
    let mut ctx = ActionCtx::new("f1");
    let cases = [
        (
            json!({"_type": "create", "shape": {"_type": "hologram", "shapeId": "h"}}),
            "unknown shape type",
        ),
        (json!({"_type": "teleport"}), "unknown action"),
        (json!({"intent": "no type"}), "no '_type'"),
        (json!([1, 2, 3]), "no '_type'"),
        (json!({"_type": "create", "shape": "a box"}), "JSON object"),
        (
            json!({"_type": "align", "shapeIds": "nope", "alignment": "diagonal"}),
            "none of the shapes",
        ),
        (
            json!({"_type": "create", "shape": {"_type": "rectangle", "shapeId": ""}}),
            "invalid shape id",
        ),
    ];
    for (action, expected) in cases {
        match apply(&doc, &mut ctx, action.clone()) {
            Err(e) => assert!(e.to_string().contains(expected), "{action}: {e}"),
            Ok(n) => panic!("{action} was accepted: {n:?}"),
        }
    }
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        prop_oneof![
            Just("12".to_string()),
            Just("NaN".to_string()),
            Just("false".to_string()),
            Just("box".to_string()),
            Just("rectangle".to_string()),
            Just("pen".to_string()),
            "[a-z-]{0,8}".prop_map(|s| s),
        ]
        .prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec(
                (
                    prop_oneof![
                        Just("x".to_string()),
                        Just("y".to_string()),
                        Just("w".to_string()),
                        Just("shapeId".to_string()),
                        Just("shapeIds".to_string()),
                        Just("_type".to_string()),
                        Just("points".to_string()),
                        Just("shape".to_string()),
                        Just("update".to_string()),
                        Just("text".to_string()),
                    ],
                    inner
                ),
                0..6
            )
            .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Any JSON under any action name: a clear result, never a panic, never a shape with a
    /// non-finite number.
    #[test]
    fn arbitrary_actions_never_panic(name in prop::sample::select(Registry::canvas().names().collect::<Vec<_>>()), body in arb_json(), complete in any::<bool>()) {
        let doc = doc();
        let mut ctx = ActionCtx::new("f1");
        ctx.complete = complete;
        for seed in ["box", "n"] {
            let _ = apply(&doc, &mut ctx, json!({"_type": "create", "shape": {"_type": "rectangle", "shapeId": seed}}));
        }
        let mut action = match body {
            Value::Object(o) => Value::Object(o),
            other => json!({"shape": other.clone(), "update": other.clone(), "shapeIds": other.clone(), "points": other}),
        };
        action["_type"] = json!(name);
        let _ = apply(&doc, &mut ctx, action);
        for s in list_shapes(&doc.transact()) {
            prop_assert!(s.x.is_finite() && s.y.is_finite() && s.rotation.is_finite());
        }
    }
}
