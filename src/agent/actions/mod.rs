//! Fairy actions: one file per action, each with its JSON schema (for the model's response
//! schema), a `parse` from the model's JSON to typed arguments, an `apply` of those arguments
//! to the document, and whether it saves to chat history; one [`Registry`] that refuses
//! duplicate names.
//!
//! # Layout
//! - this file: the [`CanvasAction`] trait, [`CanvasArgs`] (the typed arguments of every canvas
//!   action), [`Note`], [`ActionCtx`], [`ActionError`], the [`Registry`];
//! - [`common`]: id, number and closed-set readers shared by the parsers, the list-of-shapes
//!   preamble and apply frame, schema builders (canvas and runtime actions alike);
//! - [`canvas`]: one file per canvas action: `create`, `update`, `delete`, `move_`, `label`,
//!   `place`, `align`, `distribute`, `stack`, `rotate`, `resize`, `restack` (bring-to-front
//!   and send-to-back as one `Restack { front }`), `pen`, `clear`, `create_page`,
//!   `change_page`;
//! - [`runtime`]: the solo runtime actions (`message`, `think`, `review`,
//!   `upsert-personal-todo`, `fly-to-bounds`, solo tasks), their typed arguments and
//!   [`runtime::RuntimeCommand`], which reads any complete runtime action once;
//! - [`project`]: the project actions' typed arguments and schemas;
//! - [`kinds`]: the runtime and project actions by kind (a leaf), which the modes' one table of
//!   allowed actions lists.
//!
//! The runtime actions are registered as [`RuntimeAction`]s: a name, a schema and the history
//! flag, with the same duplicate check, so one registry ([`runtime::full_registry`]) produces
//! the model's whole response schema. What they do is the runtime's (`runtime/turn/runtime_actions.rs`,
//! `runtime/project_work/actions.rs`). Dependencies go `runtime` → `project` → `common`.
//!
//! # Parse → typed arguments → apply
//! A canvas action is read from the model's JSON once: the [`Registry`] refuses what is not
//! an action at all (not an object, no `_type`, an unknown or non-canvas name) in one place,
//! then the action's [`CanvasAction::parse`] turns the object into its arguments struct
//! (`MoveArgs { shape: ShapeId, x, y, anchor: Anchor }`…), making the corrections the model
//! needs (renamed and dropped ids, `"12"` → 12, model → page coordinates, defaults written in
//! the schema) and recording each as a [`Note`]. [`CanvasArgs::apply`] then changes the
//! document from the arguments alone: no JSON is read again and nothing defaults silently.
//!
//! Type erasure: the registry holds `Arc<dyn CanvasAction>` parsers keyed by name (object
//! safe: `parse` returns the closed enum [`CanvasArgs`], one variant per action), and apply
//! dispatches on that enum with an exhaustive `match`. An enum rather than a trait with an
//! associated `Args` type behind a wrapper: the set of canvas actions is closed and owned by
//! this module, the enum derives `Debug`/`PartialEq`/`Clone` for every action at once (the
//! tentative application compares and keeps parsed versions), and adding an action is one
//! variant plus one match arm that the compiler asks for.
//!
//! # How the fairy runtime calls this
//! ```no_run
//! use fairyring::agent::actions::{ActionCtx, Registry};
//! use fairyring::agent::apply::tentative::Tentative;
//! # let doc = yrs::Doc::new();
//! let registry = Registry::canvas();             // + registry.register_runtime(...)
//! let mut ctx = ActionCtx::new("f1");            // per request: renames, transform, page
//! let mut tentative = Tentative::new(&doc, "f1");
//! let action = serde_json::json!({"_type": "move", "shapeId": "box1", "x": 10, "y": 20});
//! // While the action streams (incomplete): revert the previous version, apply this one.
//! let _ = tentative.apply_tentative(&registry, &action, &mut ctx);
//! // When it completes: replace the tentative version by the complete one and keep it.
//! let _ = tentative.apply_complete(&registry, &action, &mut ctx);
//! // Without tentative application: parse + apply in one fairy transaction.
//! let _ = registry.apply(&doc, &action, &mut ctx);
//! ```
//! `parse` reads the document and updates the request's [`ActionCtx`] (renames): it must run
//! on each freshly received version exactly once, against the document that version is
//! applied to.

pub mod canvas;
pub mod common;
pub mod kinds;
pub mod project;
pub mod runtime;

use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock};

use serde_json::Value;
use yrs::{Doc, Transact, TransactionMut};

use crate::canvas::CanvasError;
use crate::canvas::ids::IdRenames;
use crate::canvas::schema::MAIN_PAGE;
use crate::canvas::transform::PromptTransform;
use crate::ids::ShapeId;
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

/// One correction made while parsing an action, told to the model ([`Note`]'s `Display` is
/// the sentence it reads).
#[derive(Debug, Clone, PartialEq)]
pub enum Note {
    /// A reference in a list of shapes was left out.
    Ignored {
        /// The id as the model wrote it.
        reference: String,
        /// Why it could not be used.
        why: ActionError,
    },
    /// A new shape's id was taken; the shape got another one (later references follow).
    IdTaken {
        /// The id the model asked for.
        wanted: String,
        /// The id the shape got.
        got: ShapeId,
    },
    /// An arrow's binding named a shape that does not exist; the end stays unbound.
    BindingDropped {
        /// `fromId` or `toId`.
        binding: &'static str,
        /// The id the model wrote.
        target: String,
    },
    /// A new page's id was taken; the page got another one.
    PageTaken {
        /// The page id the model asked for.
        wanted: String,
        /// The id the page got.
        got: String,
    },
}

impl std::fmt::Display for Note {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Note::Ignored { reference, why } => write!(f, "ignored '{reference}': {why}"),
            Note::IdTaken { wanted, got } => {
                write!(f, "shape id '{wanted}' was taken: the new shape is '{got}'")
            }
            Note::BindingDropped { binding, target } => {
                write!(f, "'{binding}' '{target}' does not exist: dropped")
            }
            Note::PageTaken { wanted, got } => {
                write!(f, "page '{wanted}' exists: the new page is '{got}'")
            }
        }
    }
}

/// An action's typed arguments and the corrections parsing made.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    /// What [`CanvasArgs::apply`] applies.
    pub args: CanvasArgs,
    /// The corrections, in the order they were made.
    pub notes: Vec<Note>,
}

impl Parsed {
    /// Arguments without corrections.
    pub fn clean(args: impl Into<CanvasArgs>) -> Self {
        Parsed {
            args: args.into(),
            notes: Vec::new(),
        }
    }
}

/// What the model is told about an applied action: one sentence per [`Note`] (renames,
/// dropped references); empty when nothing changed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sanitized {
    /// One sentence per correction.
    pub notes: Vec<String>,
}

impl From<&[Note]> for Sanitized {
    fn from(notes: &[Note]) -> Self {
        Sanitized {
            notes: notes.iter().map(ToString::to_string).collect(),
        }
    }
}

/// Declares [`CanvasArgs`] from one list: the enum, `From<XArgs>` for each variant, and
/// [`CanvasArgs::apply`] dispatching to each action module's `apply(txn, &args, ctx)`.
macro_rules! canvas_args {
    ($($(#[$doc:meta])* $variant:ident($module:ident::$args:ident)),+ $(,)?) => {
        /// The typed arguments of every canvas action, one variant per action (see the module
        /// documentation for why an enum).
        #[derive(Debug, Clone, PartialEq)]
        pub enum CanvasArgs {
            $($(#[$doc])* $variant(canvas::$module::$args)),+
        }

        $(impl From<canvas::$module::$args> for CanvasArgs {
            fn from(args: canvas::$module::$args) -> Self {
                CanvasArgs::$variant(args)
            }
        })+

        impl CanvasArgs {
            /// Applies parsed arguments inside `txn` (whose origin is the fairy's), against
            /// the document they were parsed against.
            pub fn apply(
                &self,
                txn: &mut TransactionMut<'_>,
                ctx: &mut ActionCtx,
            ) -> Result<(), ActionError> {
                match self {
                    $(CanvasArgs::$variant(args) => canvas::$module::apply(txn, args, ctx)),+
                }
            }
        }
    };
}

canvas_args!(
    /// `create`.
    Create(create::CreateArgs),
    /// `update`.
    Update(update::UpdateArgs),
    /// `delete`.
    Delete(delete::DeleteArgs),
    /// `move`.
    Move(move_::MoveArgs),
    /// `label`.
    Label(label::LabelArgs),
    /// `place`.
    Place(place::PlaceArgs),
    /// `align`.
    Align(align::AlignArgs),
    /// `distribute`.
    Distribute(distribute::DistributeArgs),
    /// `stack`.
    Stack(stack::StackArgs),
    /// `rotate`.
    Rotate(rotate::RotateArgs),
    /// `resize`.
    Resize(resize::ResizeArgs),
    /// `bring-to-front` and `send-to-back`.
    Restack(restack::RestackArgs),
    /// `pen`.
    Pen(pen::PenArgs),
    /// `clear`.
    Clear(clear::ClearArgs),
    /// `create-page`.
    CreatePage(create_page::CreatePageArgs),
    /// `change-page`.
    ChangePage(change_page::ChangePageArgs),
);

/// Per-request state shared by every action of one fairy request.
#[derive(Debug, Clone)]
pub struct ActionCtx {
    /// The acting fairy.
    pub fairy_id: String,
    /// The page the fairy works on (changed by `change-page`).
    pub page_id: String,
    /// Ids renamed while parsing this request's actions; later references follow them.
    pub renames: IdRenames,
    /// Chat-origin offset and rounding memory of this request's prompt.
    pub transform: PromptTransform,
    /// False while the action is still streaming: shapes it creates are `locked`.
    pub complete: bool,
    /// Ids of the shapes created by the last `apply`.
    pub created: Vec<String>,
    /// The shape the shown (tentative) version of this action created, while its complete
    /// version is written over it ([`crate::agent::apply::tentative`]): a `create` counts
    /// that id free and, when it keeps it, keeps the shape's z-order key while it is still on
    /// top of its page. `None` otherwise.
    pub preview: Option<String>,
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
            preview: None,
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

/// One canvas action's parser. Implementations are stateless; all request state is in
/// [`ActionCtx`].
pub trait CanvasAction: Send + Sync {
    /// The `_type` the model writes (kebab-case).
    fn name(&self) -> &'static str;
    /// JSON Schema of the action object, for the model's response schema.
    fn schema(&self) -> Value;
    /// Whether the action is kept in the chat history shown to later prompts.
    fn saves_to_history(&self) -> bool {
        true
    }
    /// Reads the action object (already known to be one, of this action's `_type`) into typed
    /// arguments, against the document as `txn` sees it. A missing required field is
    /// `Incomplete` while the action streams (`ctx.complete` false) and `Invalid` once complete.
    fn parse(
        &self,
        txn: &TransactionMut<'_>,
        fields: &Fields,
        ctx: &mut ActionCtx,
    ) -> Result<Parsed, ActionError>;
}

/// The fields of an action object, as the model wrote them.
pub type Fields = serde_json::Map<String, Value>;

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
        Arc::new(canvas::create::Create),
        Arc::new(canvas::update::Update),
        Arc::new(canvas::delete::Delete),
        Arc::new(canvas::move_::Move),
        Arc::new(canvas::label::Label),
        Arc::new(canvas::place::Place),
        Arc::new(canvas::align::Align),
        Arc::new(canvas::distribute::Distribute),
        Arc::new(canvas::stack::Stack),
        Arc::new(canvas::rotate::Rotate),
        Arc::new(canvas::resize::Resize),
        Arc::new(canvas::restack::BRING_TO_FRONT),
        Arc::new(canvas::restack::SEND_TO_BACK),
        Arc::new(canvas::pen::Pen),
        Arc::new(canvas::clear::Clear),
        Arc::new(canvas::create_page::CreatePage),
        Arc::new(canvas::change_page::ChangePage),
    ]
}

/// The names of the canvas actions, in declaration order (what the fairy modes and prompt
/// sections use), read from the handlers themselves.
pub static CANVAS_ACTIONS: LazyLock<Vec<&'static str>> =
    LazyLock::new(|| canvas_handlers().iter().map(|h| h.name()).collect());

/// The response schemas made so far, by list of allowed actions: the value and its compact
/// text.
type SchemaTexts = std::sync::Mutex<std::collections::HashMap<String, (Arc<Value>, Arc<str>)>>;

/// Every action a fairy may write, by name.
#[derive(Clone, Default)]
pub struct Registry {
    actions: BTreeMap<&'static str, Registered>,
    /// The response schema and its text per list of allowed actions (a handful of lists: one
    /// per mode), written once: every turn's request carries it.
    schema_texts: Arc<SchemaTexts>,
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
        self.schema_texts = Arc::default();
        Ok(())
    }

    /// The response schema `write` makes for `allowed`, with its compact text, made once per
    /// list of allowed actions and kept (the list is the cache's key, so `write` must depend
    /// on nothing else).
    pub fn schema_text(
        &self,
        allowed: &[&str],
        write: impl FnOnce() -> Value,
    ) -> (Arc<Value>, Arc<str>) {
        let key = allowed.join(",");
        let cached = match self.schema_texts.lock() {
            Ok(texts) => texts.get(&key).cloned(),
            Err(_) => None,
        };
        if let Some(schema) = cached {
            return schema;
        }
        // Written outside the lock: two turns may both write it once, never wait on it.
        let value = write();
        let text: Arc<str> = value.to_string().into();
        let schema = (Arc::new(value), text);
        if let Ok(mut texts) = self.schema_texts.lock() {
            texts.insert(key, schema.clone());
        }
        schema
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

    /// The action object and its canvas parser: everything that is not an action of this
    /// registry's canvas set is refused here, once for every action.
    pub fn canvas_handler<'a>(
        &self,
        action: &'a Value,
    ) -> Result<(&Arc<dyn CanvasAction>, &'a Fields), ActionError> {
        // Anything but an object has no `_type` either: one message for both.
        let (Some(fields), Some(name)) = (
            action.as_object(),
            action.get("_type").and_then(Value::as_str),
        ) else {
            return Err(ActionError::Invalid("the action has no '_type'".into()));
        };
        match self.actions.get(name) {
            Some(Registered::Canvas(h)) => Ok((h, fields)),
            Some(Registered::Runtime(_)) => Err(ActionError::NotCanvas(name.into())),
            None => Err(ActionError::Unknown(name.chars().take(64).collect())),
        }
    }

    /// Parses a canvas action against the document as `txn` sees it.
    pub fn parse(
        &self,
        txn: &TransactionMut<'_>,
        action: &Value,
        ctx: &mut ActionCtx,
    ) -> Result<Parsed, ActionError> {
        let (handler, fields) = self.canvas_handler(action)?;
        handler.parse(txn, fields, ctx)
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

    /// Parses and applies one canvas action in `txn` (whose origin is the fairy's); returns
    /// the parsed version with what the model is told.
    pub fn apply_in(
        &self,
        txn: &mut TransactionMut<'_>,
        action: &Value,
        ctx: &mut ActionCtx,
    ) -> Result<Parsed, ActionError> {
        ctx.created.clear();
        let parsed = self.parse(txn, action, ctx)?;
        parsed.args.apply(txn, ctx)?;
        Ok(parsed)
    }

    /// [`Registry::apply_in`] in a new transaction on `doc` with the fairy's origin; returns
    /// what the model is told. `ctx.complete` decides about `locked`.
    pub fn apply(
        &self,
        doc: &Doc,
        action: &Value,
        ctx: &mut ActionCtx,
    ) -> Result<Sanitized, ActionError> {
        let mut txn = doc.transact_mut_with(yrs::Origin::from(&ctx.origin()));
        self.apply_in(&mut txn, action, ctx)
            .map(|p| Sanitized::from(p.notes.as_slice()))
    }
}

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
            r.register_canvas(Arc::new(canvas::create::Create)),
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
