//! The per-room document size cap (`--max-doc-bytes`, docs/protocol.md "Document size").
//!
//! Owns the room's cheap estimate of its encoded document and the admission rule every writer
//! goes through before it changes the document: a peer's update, a REST write, a fairy's
//! action, a restore. Encoding the whole document per update is far too slow for the sync path,
//! so the estimate is an upper bound kept in step with the document:
//!
//! - it is **measured** (set to the exact size of a full-state v1 encoding) whenever the room
//!   encodes its whole document anyway — at load (the stored snapshot plus the log, an upper
//!   bound), at a compaction, when it rebuilds its cold-load answer;
//! - it **grows** by the bytes of every update the document emits (its observer), which bounds
//!   what the update added to the encoding (a full-state encoding is never larger than the
//!   encoding it started from plus the updates since: merging only removes redundancy);
//! - a compaction built from the store **rebases** it on the snapshot's size plus what the
//!   document emitted since the compaction started.
//!
//! A write is admitted when `estimate + bound ≤ max`, `bound` being what the write can add at
//! most (an update's own length; for the server's writes, a bound from their input). A write
//! that adds nothing (`bound` 0: a delete, or a restore or rollback whose net growth is not
//! positive) is admitted whatever the estimate, even in a room over the cap. When the
//! test fails and the estimate is not exact, the room measures its document once (the caller
//! gives the measure) and tests again: the slow path runs only near the cap, and at most once
//! per change of the document. Two writers admitted at once may together overshoot the cap by
//! at most one write each; the next compaction or measure corrects the estimate.
//!
//! Touches no document itself: callers pass the measure as a closure.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Why a write was refused: it would take the document past the cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the document would grow past its limit of {max} bytes (it holds about {bytes})")]
pub struct TooLarge {
    /// What the document holds now (the estimate or, after a measure, its exact size).
    pub bytes: u64,
    /// The cap (`--max-doc-bytes`).
    pub max: u64,
}

/// A room's document size estimate and cap.
#[derive(Debug)]
pub struct DocSize {
    max: u64,
    estimate: AtomicU64,
    /// True while the estimate is an exact measure (nothing emitted since).
    exact: AtomicBool,
}

impl DocSize {
    /// A room whose document is estimated at `bytes`, capped at `max` (0: no cap).
    pub fn new(max: u64, bytes: u64) -> Self {
        DocSize {
            max,
            estimate: AtomicU64::new(bytes),
            exact: AtomicBool::new(false),
        }
    }

    /// The cap (0: none).
    pub fn max(&self) -> u64 {
        self.max
    }

    /// The current estimate, in bytes.
    pub fn estimate(&self) -> u64 {
        self.estimate.load(Ordering::SeqCst)
    }

    /// The document emitted an update of `bytes` (called by its update observer).
    pub fn grow(&self, bytes: u64) {
        self.estimate.fetch_add(bytes, Ordering::SeqCst);
        self.exact.store(false, Ordering::SeqCst);
    }

    /// The document's full-state encoding is `bytes` long, measured while no write could run.
    pub fn measured(&self, bytes: u64) {
        self.estimate.store(bytes, Ordering::SeqCst);
        self.exact.store(true, Ordering::SeqCst);
    }

    /// A mark to [`DocSize::rebase`] on later (taken when a snapshot starts to be built).
    pub fn mark(&self) -> u64 {
        self.estimate()
    }

    /// A snapshot of `snapshot` bytes covers the document as it was at `mark`: the estimate
    /// becomes its size plus whatever the document emitted since the mark.
    pub fn rebase(&self, snapshot: u64, mark: u64) {
        let _ = self
            .estimate
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |now| {
                Some(snapshot.saturating_add(now.saturating_sub(mark)))
            });
    }

    /// Whether a write that adds at most `bound` bytes keeps the document within the cap.
    /// `measure` gives the document's exact encoded size; it is called only when the estimate
    /// says no and is not exact already.
    pub fn admit(&self, bound: u64, measure: impl FnOnce() -> u64) -> Result<(), TooLarge> {
        self.admit_refined(bound, measure, || bound)
    }

    /// [`DocSize::admit`] whose bound can be refined when the estimate says no (an update that
    /// repeats much of what the room holds adds less than its length): `refine` is called only
    /// then, and must return at most `bound`.
    pub fn admit_refined(
        &self,
        bound: u64,
        measure: impl FnOnce() -> u64,
        refine: impl FnOnce() -> u64,
    ) -> Result<(), TooLarge> {
        // A write that adds nothing (a delete) is always admitted, even in a room over the cap:
        // deleting is how a room is brought back under it.
        if self.max == 0 || bound == 0 {
            return Ok(());
        }
        let fits = |bytes: u64, bound: u64| bytes.saturating_add(bound) <= self.max;
        let mut bytes = self.estimate();
        if fits(bytes, bound) {
            return Ok(());
        }
        if !self.exact.load(Ordering::SeqCst) {
            bytes = measure();
            self.measured(bytes);
            if fits(bytes, bound) {
                return Ok(());
            }
        }
        let refined = refine().min(bound);
        if refined == 0 || fits(bytes, refined) {
            return Ok(());
        }
        crate::metrics::global().drop_message("doc_too_large");
        Err(TooLarge {
            bytes,
            max: self.max,
        })
    }
}

/// The most a server write built from `json_bytes` of JSON (a fairy's action, a REST shape
/// patch) can add to a document's encoding: Yjs spends a few bytes of ids and lengths per
/// property and up to 9 per number where JSON may spend 2 (`1,`), so eight times the JSON plus
/// a fixed allowance bounds it.
pub fn json_write_bound(json_bytes: usize) -> u64 {
    (json_bytes as u64).saturating_mul(8).saturating_add(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admits_under_the_cap_without_measuring() {
        let size = DocSize::new(1_000, 100);
        assert!(size.admit(900, || panic!("no measure needed")).is_ok());
        size.grow(900);
        assert_eq!(size.estimate(), 1_000);
    }

    #[test]
    fn measures_once_before_refusing_and_not_again_until_it_grows() {
        let size = DocSize::new(1_000, 990);
        let mut measures = 0;
        // The estimate says no; the exact size (400) says yes.
        assert!(
            size.admit(500, || {
                measures += 1;
                400
            })
            .is_ok()
        );
        assert_eq!((measures, size.estimate()), (1, 400));
        // Exact now: a refusal does not measure again.
        let refused = size.admit(700, || panic!("exact already"));
        assert_eq!(
            refused,
            Err(TooLarge {
                bytes: 400,
                max: 1_000
            })
        );
        size.grow(10);
        assert!(size.admit(700, || 300).is_ok());
    }

    #[test]
    fn a_refined_bound_admits_a_repeated_update() {
        let size = DocSize::new(1_000, 600);
        size.measured(600);
        assert!(size.admit(600, || 600).is_err());
        assert!(size.admit_refined(600, || 600, || 10).is_ok());
        // A refinement never raises the bound.
        assert!(size.admit_refined(300, || 600, || 5_000).is_ok());
    }

    #[test]
    fn rebase_keeps_what_was_emitted_since_the_mark() {
        let size = DocSize::new(0, 5_000);
        let mark = size.mark();
        size.grow(100);
        size.rebase(2_000, mark);
        assert_eq!(size.estimate(), 2_100);
        // No cap: everything is admitted.
        assert!(size.admit(u64::MAX, || panic!("no cap")).is_ok());
    }

    #[test]
    fn a_write_that_adds_nothing_is_admitted_over_the_cap() {
        let size = DocSize::new(1_000, 5_000);
        size.measured(5_000);
        assert!(size.admit(0, || panic!("nothing to measure")).is_ok());
        assert!(size.admit(1, || 5_000).is_err());
        // An update whose refined bound is 0 (it only deletes) goes through too.
        assert!(size.admit_refined(7, || 5_000, || 0).is_ok());
    }

    #[test]
    fn json_bound_is_generous() {
        assert_eq!(json_write_bound(0), 1024);
        assert_eq!(json_write_bound(100), 1824);
        assert_eq!(json_write_bound(usize::MAX), u64::MAX);
    }
}
