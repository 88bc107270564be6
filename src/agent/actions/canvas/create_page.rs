//! `create-page` `{pageId?, name}`: adds a page after the existing ones. The id gets a `page:`
//! prefix if it lacks one, is derived from the name when absent, and is renamed on collision.
//! The fairy stays on its page; `change-page` moves it.

use serde_json::{Value, json};
use yrs::TransactionMut;

use crate::agent::actions::common::{opt_string, schema, string};
use crate::agent::actions::{ActionCtx, ActionError, CanvasAction, Fields, Note, Parsed};
use crate::canvas::ids::{IdRenames, ensure_shape_id_is_unique};
use crate::canvas::page::{create_page, page_indexes};
use crate::canvas::zorder::index_above;

/// The `create-page` action.
pub struct CreatePage;

/// The arguments of `create-page`.
#[derive(Debug, Clone, PartialEq)]
pub struct CreatePageArgs {
    /// A free `page:` id.
    pub page_id: String,
    /// The name shown.
    pub name: String,
}

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

    fn parse(
        &self,
        txn: &TransactionMut<'_>,
        o: &Fields,
        ctx: &mut ActionCtx,
    ) -> Result<Parsed, ActionError> {
        let mut notes = Vec::new();
        let name = string(o, "name", ctx)?;
        let wanted = page_id_of(&opt_string(o, "pageId")?.unwrap_or_else(|| name.clone()));
        let pages: Vec<String> = page_indexes(txn).into_iter().map(|(id, _)| id).collect();
        // Page ids follow the same rules as shape ids, collisions included.
        let page_id = ensure_shape_id_is_unique(
            &wanted,
            |i| pages.iter().any(|p| p == i),
            &mut IdRenames::default(),
        )?
        .into_string();
        if page_id != wanted {
            notes.push(Note::PageTaken {
                wanted,
                got: page_id.clone(),
            });
        }
        Ok(Parsed {
            args: CreatePageArgs { page_id, name }.into(),
            notes,
        })
    }
}

/// Applies `create-page`: the page goes after the existing ones.
pub fn apply(
    txn: &mut TransactionMut<'_>,
    args: &CreatePageArgs,
    _ctx: &mut ActionCtx,
) -> Result<(), ActionError> {
    let indexes = page_indexes(txn);
    let index = index_above(indexes.iter().map(|(_, i)| i.as_str()));
    if !create_page(txn, &args.page_id, &args.name, &index) {
        return Err(ActionError::Invalid("that page exists already".into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::actions::canvas::test_util::*;
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
