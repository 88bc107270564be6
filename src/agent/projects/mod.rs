//! Fairies working together (docs/fairies.md "Projects"): an orchestrator plans a project,
//! creates tasks with spatial bounds, directs drones to them, waits for them and ends the
//! project; in a duo the leader also works on tasks itself.
//!
//! # Layout
//! - this file: the layout. The project vocabulary (`Role`, `ProjectStatus`, `TaskStatus`, a
//!   fairy's private `Membership`) is [`crate::agent::work`]'s, so that a fairy's state
//!   can name it without depending on projects; the project actions are
//!   [`crate::agent::actions::project`]'s and the project prompt parts
//!   [`crate::agent::prompt::project`]'s.
//! - [`book`]: the projects and their tasks, the truth: per room in memory, in the store, and
//!   mirrored into the document for browsers (never read back from it).
//! - [`doc`]: the `projects` and `tasks` roots of the document, the mirror every browser sees.
//! - [`membership`]: plain functions of membership (restart resumption, a task's request).
//! - [`waits`]: the wait/wake mechanism (`await-tasks-completion`) and the handle a runtime
//!   uses to interrupt the other members ([`waits::Peers`]).
//! - [`guard`]: a working fairy's edits stay in its task's bounds.
//!
//! Must not touch sockets. Project state lives in the store ([`book`], its only user of the
//! store) and in each member's private state (saved by the runtime like the rest of it).

pub mod book;
pub mod doc;
pub mod guard;
pub mod membership;
pub mod waits;
