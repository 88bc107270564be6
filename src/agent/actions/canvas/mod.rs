//! The canvas actions, one file each: its arguments struct, its [`super::CanvasAction`]
//! (schema and `parse`, from the model's JSON to those arguments) and its apply step on the
//! document. The trait, the closed [`super::CanvasArgs`] enum and the [`super::Registry`] that
//! holds them are the parent's; the shared readers and schema builders are
//! [`super::common`]'s. A canvas action must not know the runtime, modes or prompts.
//!
//! `restack` is bring-to-front and send-to-back as one `Restack { front }`.

pub mod align;
pub mod change_page;
pub mod clear;
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

#[cfg(test)]
pub(crate) mod test_util;

#[cfg(test)]
mod parse_tests;
