//! `create-page` `{pageId?, name}`: adds a page after the existing ones. The id gets a `page:`
//! prefix if it lacks one, is derived from the name when absent, and is renamed on collision.
//! The fairy stays on its page; `change-page` moves it.

use serde_json::{Value, json};
use yrs::TransactionMut;

use super::common::{get_str, missing, obj, obj_ref, schema};
use super::{ActionCtx, ActionError, CanvasAction, Sanitized};
use crate::canvas::coerce::string_field;
use crate::canvas::ids::{IdRenames, ensure_shape_id_is_unique};
use crate::canvas::page::{create_page, page_indexes};
use crate::canvas::zorder::index_above;

/// The `create-page` action.
pub struct CreatePage;

/// `page:`-prefixed form of a page id or name.
pub fn page_id_of(raw: &str) -> String {
    let slug: String = raw
        .trim()
        .strip_prefix("page:")
        .unwrap_or(raw.trim())
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || c == '-' || c == '_' {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .take(64)
        .collect();
    let slug = if slug.is_empty() {
        "page".to_owned()
    } else {
        slug
    };
    format!("page:{slug}")
}

impl CanvasAction for CreatePage {
    fn name(&self) -> &'static str {
        "create-page"
    }

    fn schema(&self) -> Value {
        schema(
            "create-page",
            "Create a new page.",
            json!({"pageId": {"type": "string"}, "name": {"type": "string"}}),
            &["name"],
        )
    }

    fn sanitize(
        &self,
        txn: &TransactionMut<'_>,
        action: &mut Value,
        ctx: &mut ActionCtx,
    ) -> Result<Sanitized, ActionError> {
        let mut notes = Vec::new();
        let o = obj(action)?;
        let name = string_field(o, "name")?.ok_or_else(|| missing(ctx, "name"))?;
        let wanted = page_id_of(&string_field(o, "pageId")?.unwrap_or_else(|| name.clone()));
        let pages: Vec<String> = page_indexes(txn).into_iter().map(|(id, _)| id).collect();
        let id = ensure_shape_id_is_unique(
            &wanted,
            |i| pages.iter().any(|p| p == i),
            &mut IdRenames::default(),
        )?;
        if id != wanted {
            notes.push(format!("page '{wanted}' exists: the new page is '{id}'"));
        }
        o.insert("pageId".into(), Value::String(id));
        Ok(Sanitized { notes })
    }

    fn apply(
        &self,
        txn: &mut TransactionMut<'_>,
        action: &Value,
        _ctx: &mut ActionCtx,
    ) -> Result<(), ActionError> {
        let o = obj_ref(action)?;
        let indexes = page_indexes(txn);
        let index = index_above(indexes.iter().map(|(_, i)| i.as_str()));
        if !create_page(txn, get_str(o, "pageId"), get_str(o, "name"), &index) {
            return Err(ActionError::Invalid("that page exists already".into()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::*;
    use super::*;
    use yrs::Transact;

    #[test]
    fn creates_pages_with_unique_ids() {
        let doc = doc();
        assert!(run(&doc, json!({"_type": "create-page", "name": "Ideas Board"})).is_ok());
        let r = run(
            &doc,
            json!({"_type": "create-page", "pageId": "ideas-board", "name": "Again"}),
        );
        assert!(matches!(&r, Ok(s) if s.notes.len() == 1), "{r:?}");
        let pages = page_indexes(&doc.transact());
        let ids: Vec<&str> = pages.iter().map(|(id, _)| id.as_str()).collect();
        for id in ["page:main", "page:ideas-board", "page:ideas-board-1"] {
            assert!(ids.contains(&id), "{ids:?}");
        }
        assert!(run(&doc, json!({"_type": "create-page"})).is_err());
    }
}
