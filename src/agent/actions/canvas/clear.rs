//! `clear` `{}`: deletes every shape on the fairy's current page (other pages are untouched).

use serde_json::{Value, json};
use yrs::TransactionMut;

use crate::agent::actions::common::schema;
use crate::agent::actions::{ActionCtx, ActionError, CanvasAction, Fields, Parsed};
use crate::canvas::shape::{delete_shape, list_shapes};

/// The `clear` action.
pub struct Clear;

/// The arguments of `clear`: none (it acts on the fairy's page).
#[derive(Debug, Clone, PartialEq)]
pub struct ClearArgs;

impl CanvasAction for Clear {
    fn name(&self) -> &'static str {
        "clear"
    }

    fn schema(&self) -> Value {
        schema(
            "clear",
            "Delete every shape on the current page.",
            json!({}),
            &[],
        )
    }

    fn parse(
        &self,
        _txn: &TransactionMut<'_>,
        _fields: &Fields,
        _ctx: &mut ActionCtx,
    ) -> Result<Parsed, ActionError> {
        Ok(Parsed::clean(ClearArgs))
    }
}

/// Applies `clear` to the fairy's page.
pub fn apply(
    txn: &mut TransactionMut<'_>,
    _args: &ClearArgs,
    ctx: &mut ActionCtx,
) -> Result<(), ActionError> {
    for s in list_shapes(txn) {
        if s.page_id == ctx.page_id {
            delete_shape(txn, &s.id);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::agent::actions::canvas::test_util::*;
    use serde_json::json;
    use yrs::Transact;

    #[test]
    fn clears_only_the_current_page() {
        let doc = doc();
        rect(&doc, "a", 0.0, 0.0, 1.0, 1.0);
        assert!(
            run(
                &doc,
                json!({"_type": "create-page", "pageId": "page:two", "name": "Two"})
            )
            .is_ok()
        );
        let mut ctx = crate::agent::actions::ActionCtx::new("f1");
        ctx.page_id = "page:two".into();
        let create = json!({"_type": "create", "shape": {"_type": "note", "shapeId": "n"}});
        assert!(
            crate::agent::actions::Registry::canvas()
                .apply(&doc, &create, &mut ctx)
                .is_ok()
        );
        assert!(run(&doc, json!({"_type": "clear"})).is_ok());
        let left: Vec<String> = crate::canvas::shape::list_shapes(&doc.transact())
            .into_iter()
            .map(|s| s.id)
            .collect();
        assert_eq!(left, ["n"]);
    }
}
