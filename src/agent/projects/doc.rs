//! The `projects` and `tasks` roots (docs/document-schema.md): a project is
//! `{title, description, plan, orchestratorId, members: [{id, role}], color, status}` under its
//! id; a project task is `{id, title, text, projectId, assignedTo, status, x, y, w, h, pageId}`
//! under `PROJECT_ID/TASK_ID` (the model's task ids repeat across projects; solo tasks use
//! `FAIRY_ID/TASK_ID`, [`crate::agent::state::tasks_doc`]). The roots only mirror the projects kept by
//! [`super::book`] (the truth, in the store): this module writes them, touching only the keys
//! whose value changed, and reads them only to end live records the store does not know. No
//! I/O.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use yrs::{Any, Array, Doc, Map, Out, ReadTxn, Transact};

use crate::agent::state::tasks_doc::upsert_map;
use crate::agent::work::{ProjectStatus, Role, TaskStatus};
use crate::canvas::geometry::Bounds;
use crate::canvas::schema::{PROJECTS, TASKS};
use crate::ids::FairyId;
use crate::ids::ProjectId;
use crate::origin::TxnOrigin;

/// Colours given to live projects, one each while there are enough (tldraw's names).
pub const PROJECT_COLORS: &[&str] = &[
    "violet",
    "blue",
    "green",
    "orange",
    "red",
    "light-violet",
    "light-blue",
    "light-green",
    "yellow",
    "light-red",
];

/// A member of a project.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Member {
    /// The fairy.
    pub id: FairyId,
    /// Its role.
    pub role: Role,
}

/// A project record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Project {
    /// Its id (the key in `projects`).
    #[serde(skip)]
    pub id: Option<ProjectId>,
    /// Title (the group prompt's message until the orchestrator names it).
    pub title: String,
    /// Description.
    #[serde(default)]
    pub description: String,
    /// The orchestrator's plan.
    #[serde(default)]
    pub plan: String,
    /// The leader.
    pub orchestrator_id: FairyId,
    /// Every member, the leader first.
    pub members: Vec<Member>,
    /// Its colour.
    pub color: String,
    /// Where it stands.
    pub status: ProjectStatus,
    /// How its members' canvas actions land (a group prompt's `"apply"`).
    #[serde(default, skip_serializing_if = "crate::review::ApplyMode::is_direct")]
    pub apply: crate::review::ApplyMode,
}

impl Project {
    /// The role of `fairy` in it, if a member.
    pub fn role_of(&self, fairy: &FairyId) -> Option<Role> {
        self.members.iter().find(|m| &m.id == fairy).map(|m| m.role)
    }

    /// Its members other than `fairy`.
    pub fn others(&self, fairy: &FairyId) -> Vec<FairyId> {
        self.members
            .iter()
            .filter(|m| &m.id != fairy)
            .map(|m| m.id.clone())
            .collect()
    }
}

/// A project task record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProjectTask {
    /// The model's task id.
    pub id: String,
    /// The project.
    pub project_id: ProjectId,
    /// Title.
    pub title: String,
    /// What to do.
    #[serde(default)]
    pub text: String,
    /// The member working on it.
    #[serde(default)]
    pub assigned_to: Option<FairyId>,
    /// Where it stands.
    pub status: TaskStatus,
    /// Bounds, page coordinates.
    pub x: f64,
    /// Bounds.
    pub y: f64,
    /// Bounds.
    pub w: f64,
    /// Bounds.
    pub h: f64,
    /// The page it is on.
    #[serde(default)]
    pub page_id: String,
}

impl ProjectTask {
    /// Its area.
    pub fn bounds(&self) -> Bounds {
        Bounds::new(self.x, self.y, self.w, self.h)
    }
}

/// The document key of a project task.
pub fn task_key(project: &ProjectId, task_id: &str) -> String {
    format!("{project}/{task_id}")
}

fn any_of(value: Value) -> Any {
    serde_json::from_value(value).unwrap_or(Any::Null)
}

/// How many levels of shared types a record is read through: a project is a map of values
/// (`members` is an `Any` array): one level, and room to spare.
const MAX_RECORD_DEPTH: usize = 4;

/// A map entry of the document as JSON, read through at most `depth` levels of shared types
/// (`None` past them): yrs's `ToJson` recurses once per nested type, and a stored room may
/// hold nesting deep enough to overflow the stack (20,000 nested maps under `projects` did,
/// before peers' writes there were refused). `Any` values are bounded when decoded.
fn bounded_json<T: ReadTxn>(txn: &T, value: Out, depth: usize) -> Option<Value> {
    match value {
        Out::Any(any) => serde_json::to_value(&any).ok(),
        Out::YMap(map) => {
            let depth = depth.checked_sub(1)?;
            let mut fields = serde_json::Map::new();
            for (key, value) in map.iter(txn) {
                fields.insert(key.to_owned(), bounded_json(txn, value, depth)?);
            }
            Some(Value::Object(fields))
        }
        Out::YArray(array) => {
            let depth = depth.checked_sub(1)?;
            array
                .iter(txn)
                .map(|value| bounded_json(txn, value, depth))
                .collect::<Option<Vec<_>>>()
                .map(Value::Array)
        }
        _ => None,
    }
}

fn all_json<T: ReadTxn>(txn: &T, root: &str) -> Vec<(String, Value)> {
    let Some(map) = txn.get_map(root) else {
        return Vec::new();
    };
    map.iter(txn)
        .filter_map(|(k, v)| match v {
            value @ Out::YMap(_) => {
                bounded_json(txn, value, MAX_RECORD_DEPTH).map(|v| (k.to_owned(), v))
            }
            _ => None,
        })
        .collect()
}

fn parse_project(key: &str, value: Value) -> Option<Project> {
    let mut p: Project = serde_json::from_value(value).ok()?;
    p.id = Some(ProjectId::parse(key).ok()?);
    Some(p)
}

/// Writes (creates or updates) a project record.
pub fn write_project(doc: &Doc, origin: TxnOrigin, id: &ProjectId, project: &Project) {
    let Ok(Value::Object(map)) = serde_json::to_value(project) else {
        return;
    };
    let fields: Vec<(&'static str, Any)> = [
        "title",
        "description",
        "plan",
        "orchestratorId",
        "members",
        "color",
        "status",
    ]
    .into_iter()
    .filter_map(|k| map.get(k).map(|v| (k, any_of(v.clone()))))
    .collect();
    upsert_map(doc, origin, PROJECTS, id.as_str(), fields);
}

/// The live projects the document shows (bounded reads), for the one-time migration that ends
/// those the store does not know ([`super::book`]); never a source of project state.
pub fn live_projects_in(doc: &Doc) -> Vec<Project> {
    let txn = doc.transact();
    all_json(&txn, PROJECTS)
        .into_iter()
        .filter_map(|(k, v)| parse_project(&k, v))
        .filter(|p| p.status.is_live())
        .collect()
}

/// Writes (creates or updates) a project task.
pub fn write_task(doc: &Doc, origin: TxnOrigin, task: &ProjectTask) {
    let Ok(Value::Object(map)) = serde_json::to_value(task) else {
        return;
    };
    let fields: Vec<(&'static str, Any)> = [
        "id",
        "title",
        "text",
        "projectId",
        "assignedTo",
        "status",
        "x",
        "y",
        "w",
        "h",
        "pageId",
    ]
    .into_iter()
    .map(|k| (k, map.get(k).cloned().map(any_of).unwrap_or(Any::Null)))
    .collect();
    upsert_map(
        doc,
        origin,
        TASKS,
        &task_key(&task.project_id, &task.id),
        fields,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fairy(id: &str) -> FairyId {
        FairyId::parse(id).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_mirror_is_written_and_only_live_projects_are_listed() {
        let doc = Doc::new();
        let id = ProjectId::random();
        let mut project = Project {
            id: None,
            title: "a house".into(),
            description: String::new(),
            plan: String::new(),
            orchestrator_id: fairy("o"),
            members: vec![Member {
                id: fairy("o"),
                role: Role::Orchestrator,
            }],
            color: PROJECT_COLORS[0].into(),
            status: ProjectStatus::Planning,
            apply: Default::default(),
        };
        write_project(&doc, TxnOrigin::System, &id, &project);
        let live = live_projects_in(&doc);
        assert_eq!(live.len(), 1);
        assert_eq!(live[0].id.as_ref(), Some(&id));
        assert_eq!(live[0].role_of(&fairy("o")), Some(Role::Orchestrator));
        project.status = ProjectStatus::Done;
        write_project(&doc, TxnOrigin::System, &id, &project);
        assert!(live_projects_in(&doc).is_empty());
    }
}
