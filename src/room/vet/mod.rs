//! Vetting a writer's update before any document sees it (see the room's "Hostile updates"):
//! pure and sans-IO — bytes in, verdicts out — so that the fuzz targets and property tests
//! drive it directly.
//!
//! # Layout
//! - `decode`: decoding peers' and stored v1 updates, refusing the encodings yrs would
//!   mishandle (legacy JSON content, overflowing clocks, subdocuments) by walking the bytes.
//! - [`roots`]: where each item of a room's document lives (root, nesting), against which a
//!   peer's update is checked (server-owned roots, nesting depth).
//! - [`size`]: the document size cap (`--max-doc-bytes`) and the room's estimate of its size.
//!
//! Owns no document, no socket, no store: the room ([`crate::room::writes`]) runs the checks
//! in order and applies what passes.

pub(crate) mod decode;
pub mod roots;
pub mod size;
