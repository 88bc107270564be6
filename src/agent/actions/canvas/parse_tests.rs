//! Parse tests of every canvas action: a coerced or renamed input gives the expected typed
//! arguments and notes; a malformed one gives a single `ActionError::Invalid` the model can
//! read; what is not an action at all is refused by the registry.

use serde_json::{Value, json};
use yrs::{Doc, Transact};

use crate::agent::actions::canvas::align::{AlignArgs, Alignment};
use crate::agent::actions::canvas::change_page::ChangePageArgs;
use crate::agent::actions::canvas::create_page::CreatePageArgs;
use crate::agent::actions::canvas::delete::DeleteArgs;
use crate::agent::actions::canvas::distribute::{Direction, DistributeArgs};
use crate::agent::actions::canvas::label::LabelArgs;
use crate::agent::actions::canvas::move_::{Anchor, MoveArgs};
use crate::agent::actions::canvas::pen::{Fill, PenArgs, PenStyle};
use crate::agent::actions::canvas::place::{PlaceAlign, PlaceArgs, Side};
use crate::agent::actions::canvas::resize::ResizeArgs;
use crate::agent::actions::canvas::restack::RestackArgs;
use crate::agent::actions::canvas::rotate::RotateArgs;
use crate::agent::actions::canvas::stack::StackArgs;
use crate::agent::actions::canvas::test_util::{doc, put, rect};
use crate::agent::actions::common::ClosedSet;
use crate::agent::actions::{
    ActionCtx, ActionError, CanvasArgs, Note, Parsed, Registry, Sanitized,
};
use crate::canvas::transform::PromptTransform;
use crate::ids::ShapeId;

fn id(s: &str) -> ShapeId {
    ShapeId::parse(s).unwrap_or_else(|e| panic!("{e}"))
}

fn parse_with(doc: &Doc, ctx: &mut ActionCtx, action: Value) -> Result<Parsed, ActionError> {
    let txn = doc.transact_mut();
    Registry::canvas().parse(&txn, &action, ctx)
}

fn parse(doc: &Doc, action: Value) -> Result<Parsed, ActionError> {
    parse_with(doc, &mut ActionCtx::new("f1"), action)
}

fn clean(args: impl Into<CanvasArgs>) -> Result<Parsed, ActionError> {
    Ok(Parsed::clean(args))
}

/// `a` (0,0 10×10) and `b` (50,30 30×20), user rectangles.
fn two_boxes() -> Doc {
    let doc = doc();
    rect(&doc, "a", 0.0, 0.0, 10.0, 10.0);
    rect(&doc, "b", 50.0, 30.0, 30.0, 20.0);
    doc
}

fn ghost_note() -> Note {
    Note::Ignored {
        reference: "ghost".into(),
        why: ActionError::Invalid("shape 'ghost' does not exist".into()),
    }
}

#[test]
fn move_coerces_numbers_anchor_and_id_and_converts_coordinates() {
    let doc = two_boxes();
    let mut ctx = ActionCtx::new("f1");
    ctx.transform = PromptTransform::new(100.0, 0.0);
    let mv =
        json!({"_type": "move", "shapeId": " shape:a ", "x": "12", "y": 3, "anchor": " Center "});
    let parsed = parse_with(&doc, &mut ctx, mv);
    let want = MoveArgs {
        shape: id("a"),
        x: 112.0,
        y: 3.0,
        anchor: Anchor::Center,
    };
    assert_eq!(parsed, clean(want));
    // Absent anchor: the schema's default; a renamed id is followed.
    let mut ctx = ActionCtx::new("f1");
    ctx.renames.insert(&id("box"), &id("b"));
    let mv = json!({"_type": "move", "shapeId": "box", "x": 1, "y": 2});
    let want = MoveArgs {
        shape: id("b"),
        x: 1.0,
        y: 2.0,
        anchor: Anchor::TopLeft,
    };
    assert_eq!(parse_with(&doc, &mut ctx, mv), clean(want));
}

#[test]
fn list_actions_drop_missing_shapes_with_a_typed_note() {
    let doc = two_boxes();
    let align =
        json!({"_type": "align", "shapeIds": ["a", "ghost", "a", "b"], "alignment": "LEFT"});
    let want = Parsed {
        args: AlignArgs {
            shapes: vec![id("a"), id("b")],
            alignment: Alignment::Left,
        }
        .into(),
        notes: vec![ghost_note()],
    };
    assert_eq!(parse(&doc, align), Ok(want));
    let told = Sanitized::from([ghost_note()].as_slice());
    assert_eq!(
        told.notes,
        vec!["ignored 'ghost': invalid action: shape 'ghost' does not exist".to_string()]
    );

    let dist = json!({"_type": "distribute", "shapeIds": ["a", "b"], "direction": "Vertical"});
    let want = DistributeArgs {
        shapes: vec![id("a"), id("b")],
        direction: Direction::Vertical,
    };
    assert_eq!(parse(&doc, dist), clean(want));

    let stack =
        json!({"_type": "stack", "shapeIds": ["b", "a"], "direction": "horizontal", "gap": "8px"});
    let want = StackArgs {
        shapes: vec![id("b"), id("a")],
        direction: Direction::Horizontal,
        gap: 8.0,
    };
    assert_eq!(parse(&doc, stack), clean(want));

    // One id as a plain string is a list of one.
    let front = json!({"_type": "bring-to-front", "shapeIds": "a"});
    let want = RestackArgs {
        shapes: vec![id("a")],
        front: true,
    };
    assert_eq!(parse(&doc, front), clean(want));
    let back = json!({"_type": "send-to-back", "shapeIds": ["b"]});
    let want = RestackArgs {
        shapes: vec![id("b")],
        front: false,
    };
    assert_eq!(parse(&doc, back), clean(want));
}

#[test]
fn rotate_and_resize_fill_in_their_documented_defaults() {
    let doc = two_boxes();
    // Union bounds: 0,0 .. 80,50.
    let rot = json!({"_type": "rotate", "shapeIds": ["a", "b"], "degrees": "-90"});
    let want = RotateArgs {
        shapes: vec![id("a"), id("b")],
        degrees: 270.0,
        origin: (40.0, 25.0),
    };
    assert_eq!(parse(&doc, rot), clean(want));
    let mut ctx = ActionCtx::new("f1");
    ctx.transform = PromptTransform::new(10.0, 20.0);
    let rot =
        json!({"_type": "rotate", "shapeIds": ["a"], "degrees": 45, "originX": 0, "originY": "5"});
    let want = RotateArgs {
        shapes: vec![id("a")],
        degrees: 45.0,
        origin: (10.0, 25.0),
    };
    assert_eq!(parse_with(&doc, &mut ctx, rot), clean(want));

    let resize = json!({"_type": "resize", "shapeIds": ["b"], "scaleX": "2", "scaleY": 5000});
    let want = ResizeArgs {
        shapes: vec![id("b")],
        scale_x: 2.0,
        scale_y: crate::agent::actions::canvas::resize::MAX_SCALE,
        origin: (50.0, 30.0),
    };
    assert_eq!(parse(&doc, resize), clean(want));
    let resize = json!({"_type": "resize", "shapeIds": ["a"]});
    let want = ResizeArgs {
        shapes: vec![id("a")],
        scale_x: 1.0,
        scale_y: 1.0,
        origin: (0.0, 0.0),
    };
    assert_eq!(parse(&doc, resize), clean(want));
}

#[test]
fn single_shape_actions_parse_to_their_args() {
    let doc = two_boxes();
    let place = json!({"_type": "place", "shapeId": "a", "referenceShapeId": "b", "side": "Right", "sideOffset": "10"});
    let want = PlaceArgs {
        shape: id("a"),
        reference: id("b"),
        side: Side::Right,
        side_offset: 10.0,
        align: PlaceAlign::Center,
        align_offset: 0.0,
    };
    assert_eq!(parse(&doc, place), clean(want));
    let del = json!({"_type": "delete", "shapeId": "shape:b"});
    assert_eq!(parse(&doc, del), clean(DeleteArgs { shape: id("b") }));
    let label = json!({"_type": "label", "shapeId": "a", "text": 42});
    let want = LabelArgs {
        shape: id("a"),
        text: "42".into(),
    };
    assert_eq!(parse(&doc, label), clean(want));
    assert_eq!(
        parse(&doc, json!({"_type": "clear", "intent": "start over"})),
        clean(crate::agent::actions::canvas::clear::ClearArgs)
    );
}

#[test]
fn create_and_update_record_renames_and_dropped_bindings() {
    let doc = two_boxes();
    let mut ctx = ActionCtx::new("f1");
    let create =
        json!({"_type": "create", "shape": {"_type": "box", "shapeId": "a", "x": "12", "y": 3}});
    let parsed = parse_with(&doc, &mut ctx, create);
    let Ok(Parsed {
        args: CanvasArgs::Create(args),
        notes,
    }) = parsed
    else {
        panic!("{parsed:?}");
    };
    assert_eq!(
        (
            args.shape.id.as_str(),
            args.shape.type_name.as_str(),
            args.shape.x
        ),
        ("a-1", "rectangle", 12.0)
    );
    let taken = Note::IdTaken {
        wanted: "a".into(),
        got: id("a-1"),
    };
    assert_eq!(notes, vec![taken.clone()]);
    assert_eq!(
        taken.to_string(),
        "shape id 'a' was taken: the new shape is 'a-1'"
    );
    assert_eq!(ctx.renames.resolve(&id("a")), id("a-1"));

    put(
        &doc,
        json!({"_type": "arrow", "shapeId": "ar", "x1": 0, "y1": 0, "x2": 5, "y2": 5}),
    );
    let update = json!({"_type": "update", "update": {"shapeId": "ar", "toId": "ghost", "fromId": "a", "color": "Red"}});
    let parsed = parse(&doc, update);
    let Ok(Parsed {
        args: CanvasArgs::Update(args),
        notes,
    }) = parsed
    else {
        panic!("{parsed:?}");
    };
    assert_eq!(args.shape.color, "red");
    let dropped = Note::BindingDropped {
        binding: "toId",
        target: "ghost".into(),
    };
    assert_eq!(notes, vec![dropped.clone()]);
    assert_eq!(
        dropped.to_string(),
        "'toId' 'ghost' does not exist: dropped"
    );
}

#[test]
fn pen_parses_points_closed_sets_and_its_generated_id() {
    let doc = doc();
    put(
        &doc,
        json!({"_type": "pen", "shapeId": "pen", "points": [{"x": 0, "y": 0}, {"x": 1, "y": 1}]}),
    );
    let pen = json!({"_type": "pen", "points": [{"x": "1", "y": 2}, {"x": 3, "y": "4px"}, {"x": "NaN", "y": 0}], "closed": "yes", "color": "Gray", "fill": "SOLID"});
    let want = PenArgs {
        id: id("pen-1"),
        points: vec![(1.0, 2.0), (3.0, 4.0)],
        style: PenStyle::Smooth,
        closed: true,
        color: Some("grey"),
        fill: Some(Fill::Solid),
    };
    assert_eq!(parse(&doc, pen), clean(want));
    assert_eq!(Fill::NAMES, crate::canvas::schema::FILLS);
}

#[test]
fn pages_are_created_with_a_free_id_and_changed_to_by_name() {
    let doc = doc();
    let mut ctx = ActionCtx::new("f1");
    let mk = json!({"_type": "create-page", "name": "Plans"});
    let want = CreatePageArgs {
        page_id: "page:plans".into(),
        name: "Plans".into(),
    };
    assert_eq!(parse_with(&doc, &mut ctx, mk.clone()), clean(want));
    assert!(Registry::canvas().apply(&doc, &mk, &mut ctx).is_ok());
    let parsed = parse_with(&doc, &mut ctx, mk);
    let taken = Note::PageTaken {
        wanted: "page:plans".into(),
        got: "page:plans-1".into(),
    };
    assert!(
        matches!(&parsed, Ok(p) if p.notes == vec![taken.clone()]),
        "{parsed:?}"
    );
    assert_eq!(
        taken.to_string(),
        "page 'page:plans' exists: the new page is 'page:plans-1'"
    );
    let change = json!({"_type": "change-page", "pageId": "Plans"});
    let want = ChangePageArgs {
        page_id: "page:plans".into(),
    };
    assert_eq!(parse_with(&doc, &mut ctx, change), clean(want));
}

#[test]
fn malformed_actions_give_one_readable_invalid_error() {
    let doc = two_boxes();
    let cases = [
        (json!([1, 2]), "the action has no '_type'"),
        (json!({"shapeId": "a"}), "the action has no '_type'"),
        (
            json!({"_type": "move", "shapeId": "a", "y": 1}),
            "'x' is required",
        ),
        (
            json!({"_type": "move", "shapeId": "a", "x": 1, "y": 1, "anchor": "middle-ish"}),
            "'anchor' must be one of top-left, top-center, top-right, center-left, center, center-right, bottom-left, bottom-center, bottom-right",
        ),
        (
            json!({"_type": "align", "shapeIds": ["ghost"], "alignment": "left"}),
            "none of the shapes in 'shapeIds' exist",
        ),
        (
            json!({"_type": "distribute", "shapeIds": ["a", "b"]}),
            "'direction' is required",
        ),
        (
            json!({"_type": "place", "shapeId": "a", "referenceShapeId": "a", "side": "top"}),
            "a shape cannot be placed relative to itself",
        ),
        (
            json!({"_type": "resize", "shapeIds": ["a"], "scaleX": 0}),
            "'scaleX' must not be 0",
        ),
        (
            json!({"_type": "delete", "shapeId": "ghost"}),
            "shape 'ghost' does not exist",
        ),
        (
            json!({"_type": "create", "shape": "a box"}),
            "'shape' must be a JSON object",
        ),
        (
            json!({"_type": "update", "update": {"color": "red"}}),
            "'update.shapeId' is required",
        ),
        (
            json!({"_type": "pen", "points": [{"x": 1, "y": 1}]}),
            "a pen stroke needs at least 2 points with finite x and y",
        ),
        (
            json!({"_type": "change-page", "pageId": "nowhere"}),
            "page 'page:nowhere' does not exist",
        ),
    ];
    for (action, message) in cases {
        let got = parse(&doc, action.clone());
        assert_eq!(got, Err(ActionError::Invalid(message.into())), "{action}");
    }
    // Not a canvas action of this registry: refused by name, before any parser runs.
    assert_eq!(
        parse(&doc, json!({"_type": "dance"})),
        Err(ActionError::Unknown("dance".into()))
    );
}

#[test]
fn a_streaming_action_missing_a_field_is_incomplete_not_invalid() {
    let doc = two_boxes();
    let mut ctx = ActionCtx::new("f1");
    ctx.complete = false;
    let partial = json!({"_type": "move", "shapeId": "a", "x": 1});
    assert!(matches!(
        parse_with(&doc, &mut ctx, partial),
        Err(ActionError::Incomplete(_))
    ));
}
