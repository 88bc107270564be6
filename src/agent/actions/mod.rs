//! Fairy actions: one file per action, each with its JSON schema (for the model's response
//! schema), `sanitize`, `apply` to the document, and whether it saves to chat history; one
//! [`Registry`] that refuses duplicate names.
//!
//! # Layout
//! - this file: the [`CanvasAction`] trait, [`ActionCtx`], [`ActionError`], the [`Registry`];
//! - [`common`]: id, number and enum helpers shared by the sanitizers, schema builders;
//! - one file per canvas action: `create`, `update`, `delete`, `move_`, `label`, `place`,
//!   `align`, `distribute`, `stack`, `rotate`, `resize`, `restack` (bring-to-front and
//!   send-to-back as one `Restack { front }`),
//!   `pen`, `clear`, `create_page`, `change_page`.
//!
//! The runtime's non-canvas actions (`message`, `think`, `review`, `upsert-personal-todo`,
//! `fly-to-bounds`, tasks, projects) are registered by the runtime as
//! [`RuntimeAction`]s: a name, a schema and the history flag, with the same duplicate check,
//! so one registry produces the model's whole response schema.
//!
//! # How the fairy runtime calls this
//! ```no_run
//! use fairyring::agent::actions::{ActionCtx, Registry};
//! use fairyring::agent::tentative::Tentative;
//! # let doc = yrs::Doc::new();
//! let registry = Registry::canvas();             // + registry.register_runtime(...)
//! let mut ctx = ActionCtx::new("f1");            // per request: renames, transform, page
//! let mut tentative = Tentative::new(&doc, "f1");
//! let mut action = serde_json::json!({"_type": "move", "shapeId": "box1", "x": 10, "y": 20});
//! // While the action streams (incomplete): revert the previous version, apply this one.
//! let _ = tentative.apply_tentative(&registry, &action, &mut ctx);
//! // When it completes: replace the tentative version by the complete one and keep it.
//! let _ = tentative.apply_complete(&registry, &action, &mut ctx);
//! // Without tentative application: sanitize + apply in one fairy transaction.
//! let _ = registry.apply(&doc, &action, &mut ctx);
//! ```
//! `sanitize` rewrites the action JSON in place (model coordinates → page coordinates,
//! `"12"` → 12, renamed and dropped ids) and returns notes to tell the model; it must run on
//! each freshly parsed version exactly once. `apply` reads the sanitized JSON.

pub mod align;
pub mod change_page;
pub mod clear;
pub mod common;
pub mod create;
pub mod create_page;
pub mod delete;
pub mod distribute;
pub mod label;
pub mod move_;
pub mod pen;
pub mod place;
pub mod resize;
pub mod restack;
pub mod rotate;
pub mod stack;
pub mod update;

use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock};

use serde_json::Value;
use yrs::{Doc, Transact, TransactionMut};

use crate::canvas::CanvasError;
use crate::canvas::ids::IdRenames;
use crate::canvas::schema::MAIN_PAGE;
use crate::canvas::transform::PromptTransform;
use crate::origin::TxnOrigin;

/// Why an action was not applied. `Invalid` and `Canvas` messages are written for the model.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ActionError {
    /// The action cannot be applied as written; the message tells the model why.
    #[error("invalid action: {0}")]
    Invalid(String),
    /// A still-streaming action lacks what it needs to be applied; try a later version.
    #[error("action is incomplete: {0}")]
    Incomplete(String),
    /// The canvas model refused a value.
    #[error(transparent)]
    Canvas(#[from] CanvasError),
    /// No action of that name is registered.
    #[error("unknown action '{0}'")]
    Unknown(String),
    /// The action exists but is the runtime's, not a canvas action.
    #[error("action '{0}' is not a canvas action")]
    NotCanvas(String),
    /// Two actions were registered under one name.
    #[error("action '{0}' is registered twice")]
    Duplicate(String),
}

/// What sanitizing told the model (renames, dropped references); empty when nothing changed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sanitized {
    /// One sentence per correction.
    pub notes: Vec<String>,
}

/// Per-request state shared by every action of one fairy request.
#[derive(Debug, Clone)]
pub struct ActionCtx {
    /// The acting fairy.
    pub fairy_id: String,
    /// The page the fairy works on (changed by `change-page`).
    pub page_id: String,
    /// Ids renamed while sanitizing this request; later references follow them.
    pub renames: IdRenames,
    /// Chat-origin offset and rounding memory of this request's prompt.
    pub transform: PromptTransform,
    /// False while the action is still streaming: shapes it creates are `locked`.
    pub complete: bool,
    /// Ids of the shapes created by the last `apply`.
    pub created: Vec<String>,
}

impl ActionCtx {
    /// A context on `page:main` with no offset.
    pub fn new(fairy_id: impl Into<String>) -> Self {
        ActionCtx {
            fairy_id: fairy_id.into(),
            page_id: MAIN_PAGE.into(),
            renames: IdRenames::default(),
            transform: PromptTransform::default(),
            complete: true,
            created: Vec::new(),
        }
    }

    /// The fairy's transaction origin.
    pub fn origin(&self) -> TxnOrigin {
        TxnOrigin::fairy(self.fairy_id.clone())
    }

    /// The `createdBy` value of the fairy's shapes.
    pub fn author(&self) -> String {
        format!("fairy:{}", self.fairy_id)
    }
}

/// One canvas action. Implementations are stateless; all request state is in [`ActionCtx`].
pub trait CanvasAction: Send + Sync {
    /// The `_type` the model writes (kebab-case).
    fn name(&self) -> &'static str;
    /// JSON Schema of the action object, for the model's response schema.
    fn schema(&self) -> Value;
    /// Whether the action is kept in the chat history shown to later prompts.
    fn saves_to_history(&self) -> bool {
        true
    }
    /// Validates and normalises `action` in place against the document as `txn` sees it.
    fn sanitize(
        &self,
        txn: &TransactionMut<'_>,
        action: &mut Value,
        ctx: &mut ActionCtx,
    ) -> Result<Sanitized, ActionError>;
    /// Applies a sanitized action inside `txn` (whose origin is the fairy's).
    fn apply(
        &self,
        txn: &mut TransactionMut<'_>,
        action: &Value,
        ctx: &mut ActionCtx,
    ) -> Result<(), ActionError>;
}

/// A non-canvas action owned by the fairy runtime: the registry only knows its name, schema
/// and history flag.
#[derive(Debug, Clone)]
pub struct RuntimeAction {
    /// The `_type` the model writes.
    pub name: &'static str,
    /// JSON Schema of the action object.
    pub schema: Value,
    /// Whether it is kept in the chat history.
    pub saves_to_history: bool,
}

/// A registered action.
#[derive(Clone)]
pub enum Registered {
    /// Applied to the document by this module.
    Canvas(Arc<dyn CanvasAction>),
    /// Handled by the fairy runtime.
    Runtime(RuntimeAction),
}

impl Registered {
    /// The action's JSON Schema.
    pub fn schema(&self) -> Value {
        match self {
            Registered::Canvas(h) => h.schema(),
            Registered::Runtime(r) => r.schema.clone(),
        }
    }

    /// Whether it is kept in the chat history.
    pub fn saves_to_history(&self) -> bool {
        match self {
            Registered::Canvas(h) => h.saves_to_history(),
            Registered::Runtime(r) => r.saves_to_history,
        }
    }
}

/// Every canvas action of this module: the one list. [`CANVAS_ACTIONS`] and
/// [`Registry::canvas`] are made from it.
fn canvas_handlers() -> Vec<Arc<dyn CanvasAction>> {
    vec![
        Arc::new(create::Create),
        Arc::new(update::Update),
        Arc::new(delete::Delete),
        Arc::new(move_::Move),
        Arc::new(label::Label),
        Arc::new(place::Place),
        Arc::new(align::Align),
        Arc::new(distribute::Distribute),
        Arc::new(stack::Stack),
        Arc::new(rotate::Rotate),
        Arc::new(resize::Resize),
        Arc::new(restack::BRING_TO_FRONT),
        Arc::new(restack::SEND_TO_BACK),
        Arc::new(pen::Pen),
        Arc::new(clear::Clear),
        Arc::new(create_page::CreatePage),
        Arc::new(change_page::ChangePage),
    ]
}

/// The names of the canvas actions, in declaration order (what the fairy modes and prompt
/// sections use), read from the handlers themselves.
pub static CANVAS_ACTIONS: LazyLock<Vec<&'static str>> =
    LazyLock::new(|| canvas_handlers().iter().map(|h| h.name()).collect());

/// Every action a fairy may write, by name.
#[derive(Clone, Default)]
pub struct Registry {
    actions: BTreeMap<&'static str, Registered>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// A registry holding every canvas action of this module.
    ///
    /// # Panics
    /// If two canvas actions share a name: a programming error in [`canvas_handlers`] that no
    /// input can cause, refused loudly at the first registry built (every test builds one).
    pub fn canvas() -> Self {
        let mut r = Self::new();
        for h in canvas_handlers() {
            r.register_canvas(h).unwrap_or_else(|e| panic!("{e}"));
        }
        r
    }

    fn insert(&mut self, name: &'static str, entry: Registered) -> Result<(), ActionError> {
        if self.actions.contains_key(name) {
            return Err(ActionError::Duplicate(name.into()));
        }
        self.actions.insert(name, entry);
        Ok(())
    }

    /// Adds a canvas action; refuses a name already taken.
    pub fn register_canvas(&mut self, handler: Arc<dyn CanvasAction>) -> Result<(), ActionError> {
        self.insert(handler.name(), Registered::Canvas(handler))
    }

    /// Adds one of the runtime's actions; refuses a name already taken.
    pub fn register_runtime(&mut self, action: RuntimeAction) -> Result<(), ActionError> {
        self.insert(action.name, Registered::Runtime(action))
    }

    /// The action registered under `name`.
    pub fn get(&self, name: &str) -> Option<&Registered> {
        self.actions.get(name)
    }

    /// The canvas action for an action object's `_type`.
    pub fn canvas_handler(&self, action: &Value) -> Result<&Arc<dyn CanvasAction>, ActionError> {
        let name = action
            .get("_type")
            .and_then(Value::as_str)
            .ok_or_else(|| ActionError::Invalid("the action has no '_type'".into()))?;
        match self.actions.get(name) {
            Some(Registered::Canvas(h)) => Ok(h),
            Some(Registered::Runtime(_)) => Err(ActionError::NotCanvas(name.into())),
            None => Err(ActionError::Unknown(name.chars().take(64).collect())),
        }
    }

    /// Registered names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.actions.keys().copied()
    }

    /// The model's response schema: `{"actions": [one of the registered actions]}`.
    pub fn response_schema(&self) -> Value {
        let one_of: Vec<Value> = self.actions.values().map(Registered::schema).collect();
        serde_json::json!({
            "type": "object",
            "properties": {"actions": {"type": "array", "items": {"oneOf": one_of}}},
            "required": ["actions"],
        })
    }

    /// Sanitizes and applies one canvas action in a single transaction with the fairy's origin.
    /// The sanitized JSON is returned through `action`.
    pub fn apply_in(
        &self,
        txn: &mut TransactionMut<'_>,
        action: &mut Value,
        ctx: &mut ActionCtx,
    ) -> Result<Sanitized, ActionError> {
        let handler = self.canvas_handler(action)?.clone();
        ctx.created.clear();
        let notes = handler.sanitize(txn, action, ctx)?;
        handler.apply(txn, action, ctx)?;
        Ok(notes)
    }

    /// [`Registry::apply_in`] in a new transaction on `doc` with the fairy's origin. Takes a
    /// copy of `action` and returns the notes; `ctx.complete` decides about `locked`.
    pub fn apply(
        &self,
        doc: &Doc,
        action: &Value,
        ctx: &mut ActionCtx,
    ) -> Result<Sanitized, ActionError> {
        let mut action = action.clone();
        let mut txn = doc.transact_mut_with(yrs::Origin::from(&ctx.origin()));
        self.apply_in(&mut txn, &mut action, ctx)
    }
}

#[cfg(test)]
pub(crate) mod test_util;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_has_every_canvas_action_once() {
        let r = Registry::canvas();
        let mut names: Vec<_> = r.names().collect();
        let mut listed = CANVAS_ACTIONS.clone();
        names.sort_unstable();
        listed.sort_unstable();
        assert_eq!(names, listed, "Registry::canvas and CANVAS_ACTIONS differ");
        // Registering the list twice fails on the first name.
        let mut twice = Registry::canvas();
        let again = canvas_handlers()
            .into_iter()
            .map(|h| twice.register_canvas(h));
        assert!(
            again
                .into_iter()
                .all(|r| matches!(r, Err(ActionError::Duplicate(_))))
        );
        assert_eq!(listed.len(), 17, "{listed:?}");
        listed.dedup();
        assert_eq!(listed.len(), 17, "a name is listed twice");
    }

    #[test]
    fn duplicates_are_refused_and_runtime_actions_fit() {
        let mut r = Registry::canvas();
        assert_eq!(
            r.register_canvas(Arc::new(create::Create)),
            Err(ActionError::Duplicate("create".into()))
        );
        let message = RuntimeAction {
            name: "message",
            schema: serde_json::json!({"type": "object"}),
            saves_to_history: true,
        };
        assert_eq!(r.register_runtime(message.clone()), Ok(()));
        assert!(r.register_runtime(message).is_err());
        let action = serde_json::json!({"_type": "message", "text": "hi"});
        assert!(matches!(
            r.canvas_handler(&action),
            Err(ActionError::NotCanvas(_))
        ));
        let schema = r.response_schema();
        let n = schema["properties"]["actions"]["items"]["oneOf"]
            .as_array()
            .map(Vec::len);
        assert_eq!(n, Some(18));
    }

    #[test]
    fn every_schema_names_its_type() {
        let r = Registry::canvas();
        for name in r.names() {
            let s = r.get(name).map(Registered::schema).unwrap_or_default();
            assert_eq!(s["properties"]["_type"]["const"], serde_json::json!(name));
        }
    }
}
