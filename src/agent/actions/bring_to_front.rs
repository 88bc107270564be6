//! `bring-to-front` `{shapeIds}`: gives the shapes new z-order keys above every shape on their
//! page, keeping their relative order.

use serde_json::{Value, json};
use yrs::TransactionMut;

use super::common::{get_ids, ids_schema, load_all, obj, obj_ref, save_all, schema, shape_refs};
use super::{ActionCtx, ActionError, CanvasAction, Sanitized};
use crate::canvas::shape::list_shapes;
use crate::canvas::zorder::{indexes_above, indexes_below};

/// The `bring-to-front` action.
pub struct BringToFront;

/// Re-keys `ids` to the top (`front`) or bottom of their page's z-order.
pub(crate) fn restack(
    txn: &mut TransactionMut<'_>,
    ids: &[String],
    front: bool,
) -> Result<(), ActionError> {
    let mut shapes = load_all(txn, ids)?;
    shapes.sort_by(|a, b| a.index.cmp(&b.index).then_with(|| a.id.cmp(&b.id)));
    let all = list_shapes(txn);
    let mut pages: Vec<String> = shapes.iter().map(|s| s.page_id.clone()).collect();
    pages.dedup();
    for page in pages {
        let others = all
            .iter()
            .filter(|s| s.page_id == page && !ids.contains(&s.id))
            .map(|s| s.index.as_str());
        let mine: Vec<usize> = (0..shapes.len())
            .filter(|i| shapes.get(*i).is_some_and(|s| s.page_id == page))
            .collect();
        let keys = if front {
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

impl CanvasAction for BringToFront {
    fn name(&self) -> &'static str {
        "bring-to-front"
    }

    fn schema(&self) -> Value {
        schema(
            "bring-to-front",
            "Move shapes above all others.",
            json!({"shapeIds": ids_schema()}),
            &["shapeIds"],
        )
    }

    fn sanitize(
        &self,
        txn: &TransactionMut<'_>,
        action: &mut Value,
        ctx: &mut ActionCtx,
    ) -> Result<Sanitized, ActionError> {
        let mut notes = Vec::new();
        shape_refs(txn, obj(action)?, "shapeIds", ctx, &mut notes)?;
        Ok(Sanitized { notes })
    }

    fn apply(
        &self,
        txn: &mut TransactionMut<'_>,
        action: &Value,
        _ctx: &mut ActionCtx,
    ) -> Result<(), ActionError> {
        restack(txn, &get_ids(obj_ref(action)?, "shapeIds"), true)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::*;
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
