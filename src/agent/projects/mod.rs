//! Fairies working together (docs/fairies.md "Projects"): an orchestrator plans a project,
//! creates tasks with spatial bounds, directs drones to them, waits for them and ends the
//! project; in a duo the leader also works on tasks itself.
//!
//! # Layout
//! - this file: the layout; the project vocabulary ([`Role`], [`ProjectStatus`],
//!   [`TaskStatus`], a fairy's private [`Membership`]) is [`super::work`]'s, re-exported,
//!   so that a fairy's state can name it without depending on projects.
//! - [`book`]: the projects and their tasks, the truth: per room in memory, in the store, and
//!   mirrored into the document for browsers (never read back from it).
//! - [`doc`]: the `projects` and `tasks` roots of the document, the mirror every browser sees.
//! - [`actions`]: the project actions' typed arguments, parsed once, and their schemas.
//! - [`membership`]: plain functions of membership (restart resumption, a task's request).
//! - [`waits`]: the wait/wake mechanism (`await-tasks-completion`) and the handle a runtime
//!   uses to interrupt the other members ([`waits::Peers`]).
//! - [`guard`]: a working fairy's edits stay in its task's bounds.
//! - [`prompt`]: the prompt parts `currentProject` (orchestrator and drone views) and the mode
//!   sections.
//!
//! Must not touch sockets. Project state lives in the store ([`book`], its only user of the
//! store) and in each member's private state (saved by the runtime like the rest of it).

pub mod actions;
pub mod book;
pub mod doc;
pub mod guard;
pub mod membership;
pub mod prompt;
pub mod waits;
