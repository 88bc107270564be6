//! The two z-order actions as one [`Restack`]: `bring-to-front` `{shapeIds}` gives the shapes
//! new z-order keys above every shape on their page, `send-to-back` below, both keeping the
//! shapes' relative order.

use serde_json::{Value, json};
use yrs::TransactionMut;

use crate::agent::actions::common::{ids_schema, load_all, save_all, schema, shape_list};
use crate::agent::actions::{ActionCtx, ActionError, CanvasAction, Fields, Parsed};
use crate::canvas::shape::{list_shapes, paint_order};
use crate::canvas::zorder::{indexes_above, indexes_below};
use crate::ids::ShapeId;

/// `bring-to-front` (`front: true`) or `send-to-back` (`front: false`).
pub struct Restack {
    /// Above every other shape, or below.
    pub front: bool,
}

/// `bring-to-front`.
pub const BRING_TO_FRONT: Restack = Restack { front: true };
/// `send-to-back`.
pub const SEND_TO_BACK: Restack = Restack { front: false };

/// The arguments of both z-order actions.
#[derive(Debug, Clone, PartialEq)]
pub struct RestackArgs {
    /// The shapes re-keyed, keeping their relative order.
    pub shapes: Vec<ShapeId>,
    /// Above every other shape of their page, or below.
    pub front: bool,
}

/// Applies `bring-to-front` / `send-to-back`: re-keys the shapes to the top (`front`) or
/// bottom of their page's z-order.
pub fn apply(
    txn: &mut TransactionMut<'_>,
    args: &RestackArgs,
    _ctx: &mut ActionCtx,
) -> Result<(), ActionError> {
    let mut shapes = load_all(txn, &args.shapes)?;
    shapes.sort_by(paint_order);
    let all = list_shapes(txn);
    let mut pages: Vec<String> = shapes.iter().map(|s| s.page_id.clone()).collect();
    pages.dedup();
    for page in pages {
        let others = all
            .iter()
            .filter(|s| s.page_id == page && !args.shapes.iter().any(|id| *id == *s.id))
            .map(|s| s.index.as_str());
        let mine: Vec<usize> = (0..shapes.len())
            .filter(|i| shapes.get(*i).is_some_and(|s| s.page_id == page))
            .collect();
        let keys = if args.front {
            indexes_above(others, mine.len())
        } else {
            indexes_below(others, mine.len())
        };
        for (i, key) in mine.into_iter().zip(keys) {
            if let Some(s) = shapes.get_mut(i) {
                s.index = key;
            }
        }
    }
    save_all(txn, &shapes);
    Ok(())
}

impl CanvasAction for Restack {
    fn name(&self) -> &'static str {
        if self.front {
            "bring-to-front"
        } else {
            "send-to-back"
        }
    }

    fn schema(&self) -> Value {
        let description = if self.front {
            "Move shapes above all others."
        } else {
            "Move shapes below all others."
        };
        schema(
            self.name(),
            description,
            json!({"shapeIds": ids_schema()}),
            &["shapeIds"],
        )
    }

    fn parse(
        &self,
        txn: &TransactionMut<'_>,
        o: &Fields,
        ctx: &mut ActionCtx,
    ) -> Result<Parsed, ActionError> {
        let (shapes, notes) = shape_list(txn, o, ctx)?;
        Ok(Parsed {
            args: RestackArgs {
                shapes,
                front: self.front,
            }
            .into(),
            notes,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::agent::actions::canvas::test_util::*;
    use serde_json::json;
    use yrs::Transact;

    fn order(doc: &yrs::Doc) -> Vec<String> {
        crate::canvas::shape::list_shapes(&doc.transact())
            .into_iter()
            .map(|s| s.id)
            .collect()
    }

    #[test]
    fn front_and_back_keep_relative_order() {
        let doc = doc();
        for id in ["a", "b", "c", "d"] {
            assert!(
                run(
                    &doc,
                    json!({"_type": "create", "shape": {"_type": "rectangle", "shapeId": id}})
                )
                .is_ok()
            );
        }
        assert_eq!(order(&doc), ["a", "b", "c", "d"]);
        assert!(
            run(
                &doc,
                json!({"_type": "bring-to-front", "shapeIds": ["b", "a"]})
            )
            .is_ok()
        );
        assert_eq!(order(&doc), ["c", "d", "a", "b"]);
        assert!(
            run(
                &doc,
                json!({"_type": "send-to-back", "shapeIds": ["b", "d"]})
            )
            .is_ok()
        );
        assert_eq!(order(&doc), ["d", "b", "c", "a"]);
    }
}
