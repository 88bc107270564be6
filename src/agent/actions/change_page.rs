//! `change-page` `{pageId}`: switches the page the fairy works on (its [`ActionCtx`] state);
//! the document is unchanged, so it does not save to history.

use serde_json::{Value, json};
use yrs::TransactionMut;

use super::common::{get_str, missing, obj, obj_ref, schema};
use super::create_page::page_id_of;
use super::{ActionCtx, ActionError, CanvasAction, Sanitized};
use crate::canvas::coerce::string_field;
use crate::canvas::page::page_exists;

/// The `change-page` action.
pub struct ChangePage;

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

    fn sanitize(
        &self,
        txn: &TransactionMut<'_>,
        action: &mut Value,
        ctx: &mut ActionCtx,
    ) -> Result<Sanitized, ActionError> {
        let o = obj(action)?;
        let raw = string_field(o, "pageId")?.ok_or_else(|| missing(ctx, "pageId"))?;
        let id = if page_exists(txn, &raw) {
            raw
        } else {
            page_id_of(&raw)
        };
        if !page_exists(txn, &id) {
            return Err(ActionError::Invalid(format!("page '{id}' does not exist")));
        }
        o.insert("pageId".into(), Value::String(id));
        Ok(Sanitized::default())
    }

    fn apply(
        &self,
        _txn: &mut TransactionMut<'_>,
        action: &Value,
        ctx: &mut ActionCtx,
    ) -> Result<(), ActionError> {
        ctx.page_id = get_str(obj_ref(action)?, "pageId").to_owned();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::*;
    use super::super::{ActionCtx, Registry};
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
