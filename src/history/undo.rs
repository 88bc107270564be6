//! The one rule of undoing an actor (docs/history.md "Restore and rollback", docs/fairies.md
//! "Overrule"): take back what one actor changed, keeping what others changed afterwards.
//! History's [`crate::history::replay::Rollback`] (`POST …/rollback`, one actor since a
//! version) and a fairy's take-back of one request (`POST …/requests/{id}/revert`) both decide
//! with it, each from its own record of who changed what.
//!
//! - [`ActorChange::take_back`]: one change of the actor (a property, or a whole entry: its
//!   existence and content) is taken back only while it is still what the actor left: nobody
//!   else changed it afterwards and the live document holds the value the actor left. Then the
//!   value from before the actor's change comes back (absent: the key or the entry goes);
//!   otherwise it stays as others left it ([`TakeBack::Keep`]).
//! - [`Buried`]: an entry someone deleted keeps its record, so that bringing it back exactly
//!   as it was (a restore of a later version) brings back who made it and who changed it.
//!   A shape's `locked` marker (a fairy's, while it streams the shape) is not compared: a
//!   restore never writes it.
//!
//! Pure: no document, no I/O. Must not name either caller.

/// One change of the actor being undone: the value before it, the value the actor left, and
/// whether someone else changed the same thing afterwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActorChange<V> {
    /// What was there before the actor's change (what taking it back writes).
    pub before: V,
    /// What the actor left.
    pub left: V,
    /// Someone else changed it after the actor did.
    pub changed_after: bool,
}

/// What taking back one [`ActorChange`] does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TakeBack<V> {
    /// Write this value back (it is the value from before the actor's change).
    Restore(V),
    /// Leave it: someone else changed it afterwards, or the live document no longer holds
    /// what the actor left.
    Keep,
    /// Nothing to do: the actor's change already cancelled out.
    Nothing,
}

impl<V: PartialEq> ActorChange<V> {
    /// The rule, given what the live document holds now (`live`).
    pub fn take_back(self, live: &V) -> TakeBack<V> {
        if self.changed_after || *live != self.left {
            TakeBack::Keep
        } else if self.before == self.left {
            TakeBack::Nothing
        } else {
            TakeBack::Restore(self.before)
        }
    }
}

/// The stored key of a shape's streaming marker, left out when a buried entry is compared
/// with what brings it back.
pub const LOCKED: &str = "locked";

/// An entry someone deleted, with its content then (`content`) and the record of who made it
/// and changed it (`record`): a re-creation of exactly that content brings the record back
/// ([`Buried::bring_back`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Buried<C, R> {
    /// The entry's content when it was deleted.
    pub content: C,
    /// Its record then.
    pub record: R,
}

/// A content whose keys a [`Buried`] entry compares, its `locked` marker aside.
pub trait Keyed {
    /// This content without the key `key`.
    fn without(&self, key: &str) -> Self;
}

impl<C: Keyed + PartialEq, R> Buried<C, R> {
    /// The buried record, when `recreated` is the buried content again (`locked` aside).
    pub fn bring_back(self, recreated: &C) -> Option<R> {
        (self.content.without(LOCKED) == recreated.without(LOCKED)).then_some(self.record)
    }
}

impl<K: Ord + Clone + std::borrow::Borrow<str>, V: Clone> Keyed
    for std::collections::BTreeMap<K, V>
{
    fn without(&self, key: &str) -> Self {
        self.iter()
            .filter(|(k, _)| (*k).borrow() != key)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn a_change_is_taken_back_only_while_it_is_what_the_actor_left() {
        let change = |changed_after| ActorChange {
            before: 1,
            left: 2,
            changed_after,
        };
        assert_eq!(change(false).take_back(&2), TakeBack::Restore(1));
        assert_eq!(change(true).take_back(&2), TakeBack::Keep, "changed after");
        assert_eq!(change(false).take_back(&3), TakeBack::Keep, "live differs");
        let noop = ActorChange {
            before: 2,
            left: 2,
            changed_after: false,
        };
        assert_eq!(noop.take_back(&2), TakeBack::Nothing);
    }

    #[test]
    fn a_buried_entry_comes_back_with_its_record_locked_marker_aside() {
        let content = |locked: bool| -> BTreeMap<String, i32> {
            let mut m = BTreeMap::from([("x".to_owned(), 1)]);
            if locked {
                m.insert(LOCKED.to_owned(), 1);
            }
            m
        };
        let buried = Buried {
            content: content(true),
            record: "the fairy's",
        };
        assert_eq!(
            buried.clone().bring_back(&content(false)),
            Some("the fairy's")
        );
        let other = BTreeMap::from([("x".to_owned(), 2)]);
        assert_eq!(buried.bring_back(&other), None);
    }
}
