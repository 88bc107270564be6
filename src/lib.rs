//! fairyring: a real-time collaboration backend for infinite-canvas apps.
//!
//! Every canvas ("room") is a Yrs CRDT document served over WebSockets with the standard
//! y-protocols sync and awareness messages, so the official `yjs`/`y-websocket` clients work
//! unchanged. AI agents ("fairies") live in the server and edit the same documents.
//!
//! # Layout
//! - [`config`]: the one configuration struct (CLI flags with `FAIRYRING_*` env fallbacks).
//! - [`priority`]: the lower scheduling priority of background threads (fairies, snapshots), a leaf.
//! - [`clock`]: the one clock (monotonic instants, wall-clock millis, a manual test clock), a leaf.
//! - [`contain`]: panics contained where hostile input meets a dependency that is not
//!   panic-free, without std's hook printing or symbolizing a backtrace, a leaf.
//! - [`ids`]: plain validated ids (room names), a leaf every other module may import.
//! - [`actor`]: who wrote a logged update (a person, a fairy, the server), a leaf the room
//!   logs and the history reads.
//! - [`origin`]: who authored a transaction (`client:CONN:SUB`, `fairy:ID`, `system`).
//! - [`protocol`]: sans-IO y-protocols framing: decode inbound frames, encode outbound ones.
//! - [`room`]: one document + awareness per room, its peers, durable-then-broadcast pipeline.
//! - [`store`]: the narrow async `Store` trait and its SQLite / PostgreSQL / in-memory implementations.
//! - [`pubsub`]: fan-out between the nodes of a scale-out deployment (Redis), node liveness.
//! - [`server`]: the only module that touches sockets: HTTP routes, WebSocket peers, shutdown.
//! - [`auth`]: JWT verification and room/scope access (I/O-free, clock injected).
//! - [`metrics`]: Prometheus counters and histograms.
//! - [`canvas`]: the typed canvas model (schema v1) over the Yrs document.
//! - [`history`]: who wrote each logged update, and a room as it was: history pages, versions,
//!   restore and rollback (replayed from the store in private documents).
//! - [`review`]: review mode: fairies' suggestions in the `suggestions` root and people's
//!   decisions on them.
//! - [`agent`]: fairies (the agent runtime), laid out along a request's way: `host/` (hosting,
//!   inbox, events, budget), `runtime/` (the request loop), `prompt/`, `actions/` (canvas,
//!   runtime and project actions), `modes/`, `apply/` (tentative application, revert),
//!   `state/`, `presence/` and `projects/`; `agent/mod.rs` says what each holds.
//! - [`llm`]: language-model providers (streaming clients, failover, offline model).
//! - [`partial_json`]: incremental partial-JSON parser and the streamed action splitter.
//! - [`webhooks`]: signed webhooks (`room.updated`, fairy and project events) delivered at
//!   least once from an outbox in the store.
//! - `bench`: the `fairyring bench` load generator. Developer tooling, like the mock model's
//!   server: compiled only with the `dev-tools` feature (`cargo test` turns it on; a plain
//!   `cargo build --release` leaves it out of what ships).

pub mod actor;
pub mod agent;
pub mod auth;
#[cfg(feature = "dev-tools")]
pub mod bench;
pub mod canvas;
pub mod clock;
pub mod config;
pub mod contain;
pub mod history;
pub mod ids;
pub mod llm;
pub mod metrics;
pub mod origin;
pub mod partial_json;
pub mod priority;
pub mod protocol;
pub mod pubsub;
pub mod redact;
pub mod review;
pub mod room;
pub mod server;
pub mod store;
pub mod webhooks;
