//! `change-page` `{pageId}`: switches the page the fairy works on (its [`ActionCtx`] state);
//! the document is unchanged, so it does not save to history.

use serde_json::{Value, json};
use yrs::TransactionMut;

use crate::agent::actions::canvas::create_page::page_id_of;
use crate::agent::actions::common::{schema, string};
use crate::agent::actions::{ActionCtx, ActionError, CanvasAction, Fields, Parsed};
use crate::canvas::page::page_exists;

/// The `change-page` action.
pub struct ChangePage;

/// The arguments of `change-page`.
#[derive(Debug, Clone, PartialEq)]
pub struct ChangePageArgs {
    /// An existing page.
    pub page_id: String,
}

impl CanvasAction for ChangePage {
    fn name(&self) -> &'static str {
        "change-page"
    }

    fn schema(&self) -> Value {
        schema(
            "change-page",
            "Switch to another page.",
            json!({"pageId": {"type": "string"}}),
            &["pageId"],
        )
    }

    fn saves_to_history(&self) -> bool {
        false
    }

    fn parse(
        &self,
        txn: &TransactionMut<'_>,
        o: &Fields,
        ctx: &mut ActionCtx,
    ) -> Result<Parsed, ActionError> {
        let raw = string(o, "pageId", ctx)?;
        let page_id = if page_exists(txn, &raw) {
            raw
        } else {
            page_id_of(&raw)
        };
        if !page_exists(txn, &page_id) {
            return Err(ActionError::Invalid(format!(
                "page '{page_id}' does not exist"
            )));
        }
        Ok(Parsed::clean(ChangePageArgs { page_id }))
    }
}

/// Applies `change-page`: only the fairy's [`ActionCtx`] changes.
pub fn apply(
    _txn: &mut TransactionMut<'_>,
    args: &ChangePageArgs,
    ctx: &mut ActionCtx,
) -> Result<(), ActionError> {
    ctx.page_id = args.page_id.clone();
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::agent::actions::canvas::test_util::*;
    use crate::agent::actions::{ActionCtx, Registry};
    use serde_json::json;

    #[test]
    fn switches_to_existing_pages_only() {
        let doc = doc();
        let r = Registry::canvas();
        let mut ctx = ActionCtx::new("f1");
        assert!(
            r.apply(
                &doc,
                &json!({"_type": "create-page", "name": "two"}),
                &mut ctx
            )
            .is_ok()
        );
        assert!(
            r.apply(
                &doc,
                &json!({"_type": "change-page", "pageId": "two"}),
                &mut ctx
            )
            .is_ok()
        );
        assert_eq!(ctx.page_id, "page:two");
        assert!(
            r.apply(
                &doc,
                &json!({"_type": "change-page", "pageId": "nope"}),
                &mut ctx
            )
            .is_err()
        );
        assert_eq!(ctx.page_id, "page:two");
    }
}
