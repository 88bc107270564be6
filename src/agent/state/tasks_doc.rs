//! Solo tasks mirrored into the document's `tasks` root (docs/document-schema.md: `{title, text, projectId,
//! assignedTo, status, x, y, w, h, pageId}`), so browsers can show a fairy's plan. The key is
//! `FAIRY_ID/TASK_ID` (task ids are the model's and may repeat across fairies); `id` holds the
//! model's id. Writes only the keys whose value changed, in a transaction with the fairy's
//! origin. No I/O.

use yrs::{Any, Doc, Map, MapPrelim, Out, Transact};

use crate::agent::state::SoloTask;
use crate::canvas::schema::TASKS;
use crate::ids::FairyId;
use crate::origin::TxnOrigin;

/// The document key of a fairy's solo task.
pub fn task_key(fairy: &FairyId, task_id: &str) -> String {
    format!("{fairy}/{task_id}")
}

fn fields(fairy: &FairyId, task: &SoloTask, page_id: &str) -> Vec<(&'static str, Any)> {
    let b = task.bounds.unwrap_or_default();
    vec![
        ("id", Any::from(task.id.as_str())),
        ("title", Any::from(task.title.as_str())),
        ("text", Any::from(task.text.as_str())),
        ("projectId", Any::Null),
        ("assignedTo", Any::from(fairy.as_str())),
        ("status", Any::from(task.status.name())),
        ("x", Any::from(b.x)),
        ("y", Any::from(b.y)),
        ("w", Any::from(b.w)),
        ("h", Any::from(b.h)),
        ("pageId", Any::from(page_id)),
    ]
}

/// Creates or updates the task's map.
pub fn upsert_task(doc: &Doc, fairy: &FairyId, task: &SoloTask, page_id: &str) {
    upsert_map(
        doc,
        TxnOrigin::fairy(fairy.as_str()),
        TASKS,
        &task_key(fairy, &task.id),
        fields(fairy, task, page_id),
    );
}

/// Creates the map `key` of the root `root` with `fields`, or writes into the existing one
/// the fields whose value changed, in one transaction with `origin` (also used for the
/// project records, [`crate::agent::projects::doc`]).
pub fn upsert_map(
    doc: &Doc,
    origin: TxnOrigin,
    root: &str,
    key: &str,
    fields: Vec<(&'static str, Any)>,
) {
    let root = doc.get_or_insert_map(root);
    let mut txn = doc.transact_mut_with(origin);
    let existing = match root.get(&txn, key) {
        Some(Out::YMap(m)) => Some(m),
        _ => None,
    };
    match existing {
        None => {
            let prelim: MapPrelim = fields
                .into_iter()
                .map(|(k, v)| (k.to_owned(), yrs::In::Any(v)))
                .collect();
            root.insert(&mut txn, key, prelim);
        }
        Some(map) => {
            for (k, v) in fields {
                let same = matches!(map.get(&txn, k), Some(Out::Any(ref old)) if *old == v);
                if !same {
                    map.insert(&mut txn, k, v);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canvas::geometry::Bounds;

    #[test]
    fn tasks_are_upserted_under_the_fairys_key() {
        let doc = Doc::new();
        let fairy = FairyId::parse("f1").unwrap_or_else(|e| panic!("{e}"));
        let mut task = SoloTask {
            id: "t1".into(),
            title: "walls".into(),
            text: String::new(),
            status: crate::agent::work::TaskStatus::Todo,
            bounds: Some(Bounds::new(1.0, 2.0, 3.0, 4.0)),
        };
        upsert_task(&doc, &fairy, &task, "page:main");
        task.status = crate::agent::work::TaskStatus::Done;
        upsert_task(&doc, &fairy, &task, "page:main");
        let root = doc.get_or_insert_map(TASKS);
        let txn = doc.transact();
        let Some(Out::YMap(m)) = root.get(&txn, "f1/t1") else {
            panic!("task missing");
        };
        assert_eq!(m.get(&txn, "status"), Some(Out::Any(Any::from("done"))));
        assert_eq!(m.get(&txn, "assignedTo"), Some(Out::Any(Any::from("f1"))));
        assert_eq!(m.get(&txn, "w"), Some(Out::Any(Any::from(3.0))));
        assert_eq!(root.len(&txn), 1);
    }
}
