//! The webhook outbox (docs/webhooks.md "Delivery"): events waiting to be delivered to the
//! `--webhook-url`, kept in the store so that an event not delivered yet survives a restart,
//! and claimed with a lease so that, scaled out, each event is sent by one node at a time.
//!
//! Owns the [`Outbox`] trait every store hands out ([`super::Store::outbox`]) and its two
//! implementations: [`sql`], written once for SQLite and PostgreSQL over their dialect, and
//! [`memory`]. It knows nothing of HTTP, signatures or what an event says: a body is opaque
//! bytes (the webhooks module writes JSON). It must not touch the rooms' tables (updates,
//! snapshots, checkpoints).

pub mod memory;
pub mod sql;

use async_trait::async_trait;
use bytes::Bytes;

use super::StoreError;

/// An event to deliver, as it enters the outbox.
#[derive(Debug, Clone, PartialEq)]
pub struct OutboxEvent {
    /// The event's id (unique; what receivers deduplicate on).
    pub id: String,
    /// The exact body to POST.
    pub body: Bytes,
    /// When it was created, in milliseconds since the Unix epoch; it is due at once.
    pub created_at: u64,
}

/// An event a node claimed for delivery.
#[derive(Debug, Clone, PartialEq)]
pub struct Claimed {
    /// The event's id.
    pub id: String,
    /// The exact body to POST.
    pub body: Bytes,
    /// Attempts made before this one.
    pub attempts: u32,
}

/// An event given up on after its last attempt (kept for an operator to look at).
#[derive(Debug, Clone, PartialEq)]
pub struct DeadLetter {
    /// The event's id.
    pub id: String,
    /// Its body.
    pub body: Bytes,
    /// Attempts made.
    pub attempts: u32,
    /// Why the last attempt failed.
    pub error: String,
    /// When it was given up on, in milliseconds since the Unix epoch.
    pub dead_at: u64,
}

/// The outbox of webhook events. Times are milliseconds since the Unix epoch on the caller's
/// clock; several nodes' clocks are assumed to agree within the claim lease.
#[async_trait]
pub trait Outbox: Send + Sync {
    /// Adds an event, durably; an id already present is left as it is.
    async fn push(&self, event: OutboxEvent) -> Result<(), StoreError>;

    /// Claims up to `limit` events that are due at `now` (not dead, their next attempt at or
    /// before `now`, no live claim) until `lease_until`, oldest due first. Another caller
    /// (another node) claims none of them before `lease_until` unless they are released by
    /// [`Outbox::retry_at`].
    async fn claim(
        &self,
        now: u64,
        lease_until: u64,
        limit: usize,
    ) -> Result<Vec<Claimed>, StoreError>;

    /// The event was delivered: it leaves the outbox.
    async fn delivered(&self, id: &str) -> Result<(), StoreError>;

    /// The event's attempt failed (`error`): it has had `attempts` attempts and is due again at
    /// `next_at`; its claim is released.
    async fn retry_at(
        &self,
        id: &str,
        attempts: u32,
        next_at: u64,
        error: &str,
    ) -> Result<(), StoreError>;

    /// The event's last attempt failed: it is kept as a dead letter and never claimed again.
    async fn dead(&self, id: &str, attempts: u32, at: u64, error: &str) -> Result<(), StoreError>;

    /// When the earliest live event is due (its next attempt, or the end of its claim);
    /// `None` when none waits.
    async fn next_due(&self) -> Result<Option<u64>, StoreError>;

    /// How many events wait to be delivered (not dead).
    async fn pending(&self) -> Result<u64, StoreError>;

    /// Up to `limit` dead letters, most recent first.
    async fn dead_letters(&self, limit: usize) -> Result<Vec<DeadLetter>, StoreError>;

    /// How many dead letters are kept.
    async fn dead_count(&self) -> Result<u64, StoreError>;

    /// Drops the dead letters given up on before `before`; how many.
    async fn prune_dead(&self, before: u64) -> Result<u64, StoreError>;

    /// Up to `limit` events never attempted and not claimed at `now`, oldest first (what the
    /// outbox's cap may merge or drop; `--webhook-max-pending`).
    async fn fresh(&self, now: u64, limit: usize) -> Result<Vec<OutboxEvent>, StoreError>;

    /// Removes the events `ids` and adds `merged` in their place (if any), in one transaction,
    /// only if every one of `ids` is still never attempted nor claimed at `now` (a node may have
    /// claimed one meanwhile); whether it did.
    async fn replace(
        &self,
        now: u64,
        ids: &[String],
        merged: Option<OutboxEvent>,
    ) -> Result<bool, StoreError>;
}

/// The attempts count as the store keeps it (an `INTEGER`).
fn attempts_from(stored: i64) -> u32 {
    u32::try_from(stored.max(0)).unwrap_or(u32::MAX)
}

/// Claimed rows (with their `next_at`) oldest due first: `UPDATE … RETURNING` gives no order.
fn in_due_order(mut rows: Vec<(i64, Claimed)>) -> Vec<Claimed> {
    rows.sort_by(|a, b| (a.0, &a.1.id).cmp(&(b.0, &b.1.id)));
    rows.into_iter().map(|(_, claimed)| claimed).collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn event(id: &str, at: u64) -> OutboxEvent {
        OutboxEvent {
            id: id.to_owned(),
            body: Bytes::from(format!("{{\"id\":\"{id}\"}}")),
            created_at: at,
        }
    }

    /// The outbox contract every backend meets (run from the store's contract tests).
    pub(crate) async fn outbox_contract(outbox: &dyn Outbox) {
        assert_eq!(outbox.next_due().await.unwrap(), None);
        outbox.push(event("e-1", 1_000)).await.unwrap();
        outbox.push(event("e-2", 2_000)).await.unwrap();
        // A second push of the same id changes nothing.
        outbox.push(event("e-1", 5_000)).await.unwrap();
        assert_eq!(outbox.pending().await.unwrap(), 2);
        assert_eq!(outbox.next_due().await.unwrap(), Some(1_000));
        // Only what is due is claimed, oldest first.
        let claimed = outbox.claim(1_500, 60_000, 10).await.unwrap();
        assert_eq!(claimed.len(), 1);
        assert_eq!(claimed[0].id, "e-1");
        assert_eq!(claimed[0].attempts, 0);
        assert_eq!(claimed[0].body, event("e-1", 0).body);
        // A claimed event is nobody else's until its lease ends.
        let claimed = outbox.claim(3_000, 60_000, 10).await.unwrap();
        assert_eq!(
            claimed.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(),
            vec!["e-2"]
        );
        assert!(outbox.claim(59_999, 90_000, 10).await.unwrap().is_empty());
        assert_eq!(outbox.next_due().await.unwrap(), Some(60_000));
        // A failed attempt releases the claim and sets the next one.
        outbox.retry_at("e-1", 1, 70_000, "500").await.unwrap();
        assert_eq!(
            outbox
                .claim(60_000, 90_000, 10)
                .await
                .unwrap()
                .iter()
                .map(|c| c.id.as_str())
                .collect::<Vec<_>>(),
            vec!["e-2"],
            "e-2's lease ended; e-1 is not due before 70 s"
        );
        let again = outbox.claim(70_000, 100_000, 10).await.unwrap();
        assert_eq!(again.len(), 1);
        assert_eq!((again[0].id.as_str(), again[0].attempts), ("e-1", 1));
        outbox.delivered("e-2").await.unwrap();
        outbox.dead("e-1", 2, 71_000, "refused").await.unwrap();
        assert_eq!(outbox.pending().await.unwrap(), 0);
        assert_eq!(outbox.next_due().await.unwrap(), None);
        assert!(
            outbox
                .claim(u64::MAX / 2, u64::MAX / 2, 10)
                .await
                .unwrap()
                .is_empty()
        );
        let dead = outbox.dead_letters(10).await.unwrap();
        assert_eq!(dead.len(), 1);
        assert_eq!(
            (
                dead[0].id.as_str(),
                dead[0].attempts,
                dead[0].error.as_str(),
                dead[0].dead_at
            ),
            ("e-1", 2, "refused", 71_000)
        );
        // Delivering twice (a retry after a lost answer) is not an error.
        outbox.delivered("e-2").await.unwrap();
        assert_eq!(outbox.dead_count().await.unwrap(), 1);
        // Dead letters go once past their retention.
        assert_eq!(outbox.prune_dead(71_000).await.unwrap(), 0);
        assert_eq!(outbox.prune_dead(71_001).await.unwrap(), 1);
        assert_eq!(outbox.dead_count().await.unwrap(), 0);
        // Fresh events (never attempted, unclaimed) can be merged; a claimed one cannot.
        for (id, at) in [("f-1", 200_000), ("f-2", 201_000), ("f-3", 202_000)] {
            outbox.push(event(id, at)).await.unwrap();
        }
        let fresh = outbox.fresh(300_000, 10).await.unwrap();
        assert_eq!(
            fresh.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(),
            vec!["f-1", "f-2", "f-3"]
        );
        assert_eq!(fresh[0].created_at, 200_000);
        let claimed = outbox.claim(300_000, 400_000, 1).await.unwrap();
        assert_eq!(claimed[0].id, "f-1");
        let ids = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert!(
            !outbox
                .replace(300_000, &ids(&["f-1", "f-2"]), Some(event("m-1", 200_000)))
                .await
                .unwrap(),
            "f-1 is claimed: nothing replaced"
        );
        assert_eq!(outbox.pending().await.unwrap(), 3);
        assert!(
            outbox
                .replace(300_000, &ids(&["f-2", "f-3"]), Some(event("m-1", 201_000)))
                .await
                .unwrap()
        );
        assert_eq!(outbox.pending().await.unwrap(), 2);
        let fresh = outbox.fresh(300_000, 10).await.unwrap();
        assert_eq!(
            fresh.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(),
            vec!["m-1"]
        );
        assert!(outbox.replace(300_000, &ids(&["m-1"]), None).await.unwrap());
        assert_eq!(outbox.pending().await.unwrap(), 1);
        outbox.delivered("f-1").await.unwrap();
    }
}
