//! Where each block of a room's document lives: which root it is under and how deeply it is
//! nested in shared types. Peers' updates are checked against it before they are applied: no
//! block under a server-owned root ([`ServerRoot`]), no delete of one, no nesting of shared
//! types deeper than [`MAX_NESTING`].
//!
//! Owns the per-room [`RootIndex`] (built from the whole document at the room's first peer
//! update, then fed with every update the document emits) and the resolution of a walked
//! update's blocks to their place. Reads bytes only through [`super::decode`]'s walk; never touches a document.
//!
//! A block's root is found through its parent: an item names its root, or the item of the
//! shared type it is in, or (when it has an origin) takes its parent from its left origin, else
//! its right origin — as yrs does when it integrates it. An item whose parent cannot be found
//! (its origins were garbage-collected) is integrated nowhere by yrs and is not placed.

use std::collections::{BTreeMap, HashMap};

/// Deepest nesting of items in shared types a peer may write: 1 is a root's direct entry
/// (`shapes/{id}`), 2 a property of it, 3 a pen stroke's point (`shapes/{id}/points/[i]`) or a
/// fairy's chat item (`fairies/{id}/chat/[i]`). yrs and every reader that walks nested types
/// by recursion (`ToJson`, serde) overflow their stack on deep enough nesting; 16 leaves the
/// schema room to grow.
pub(crate) const MAX_NESTING: u16 = 16;

/// The roots only the server writes (docs/document-schema.md). A peer's update that creates,
/// changes or deletes anything under one is refused before it is applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ServerRoot {
    /// `fairies`: the fairies' public entities and chats.
    Fairies,
    /// `projects`: project records.
    Projects,
    /// `tasks`: the fairies' and projects' tasks.
    Tasks,
    /// `suggestions`: the fairies' suggestions in review mode and people's decisions.
    Suggestions,
    /// `meta`: the schema version.
    Meta,
}

impl ServerRoot {
    /// Every server-owned root.
    pub const ALL: [ServerRoot; 5] = [
        ServerRoot::Fairies,
        ServerRoot::Projects,
        ServerRoot::Tasks,
        ServerRoot::Suggestions,
        ServerRoot::Meta,
    ];

    /// The root's name in the document.
    pub fn name(self) -> &'static str {
        use crate::canvas::schema;
        match self {
            ServerRoot::Fairies => schema::FAIRIES,
            ServerRoot::Projects => schema::PROJECTS,
            ServerRoot::Tasks => schema::TASKS,
            ServerRoot::Suggestions => schema::SUGGESTIONS,
            ServerRoot::Meta => schema::META,
        }
    }

    /// The server-owned root called `name`, if it is one, or one a name differing only by case
    /// or by surrounding whitespace and control characters would pass for (`Fairies`,
    /// `"fairies "`): a peer's write under such a lookalike is refused like one under the root
    /// itself, so no client can be shown a forged twin of a server root.
    pub fn of(name: &str) -> Option<ServerRoot> {
        let plain = name
            .trim_matches(|c: char| c.is_whitespace() || c.is_control())
            .to_lowercase();
        Self::ALL.into_iter().find(|root| root.name() == plain)
    }
}

impl std::fmt::Display for ServerRoot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Where an item is: under a server-owned root or not, and at which nesting level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Place {
    /// The server-owned root it is under; `None` for the roots peers write.
    pub root: Option<ServerRoot>,
    /// 1 for a root's direct entry, one more per shared type it is nested in.
    pub level: u16,
}

/// How a walked item finds its parent (yrs's `TypePtr` before integration).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Link {
    /// A root, by name (classified as the walk reads it).
    Root(Option<ServerRoot>),
    /// The item of the shared type it is in.
    Parent(Id),
    /// Its left origin, then its right origin: it shares their parent.
    Origins(Option<Id>, Option<Id>),
}

/// A block id: client and clock.
pub(crate) type Id = (u64, u32);

/// An item block of a walked update: its clocks `start..end` of `client`, and its link.
#[derive(Debug, Clone)]
pub(crate) struct WalkedItem {
    pub client: u64,
    pub start: u32,
    pub end: u32,
    pub link: Link,
}

/// A delete-set range of a walked update: `start..end` of `client`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DeleteRange {
    pub client: u64,
    pub start: u32,
    pub end: u32,
}

/// Why a peer's update is refused by the index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Violation {
    /// It creates, changes or deletes something under a server-owned root.
    ServerOwned(ServerRoot),
    /// It nests shared types deeper than [`MAX_NESTING`].
    TooDeep,
}

/// One run of a client's consecutive items with the same place: `start..end`.
#[derive(Debug, Clone, Copy)]
struct Span {
    start: u32,
    end: u32,
    place: Place,
}

/// One client's spans, sorted by start and not overlapping. A client's items reach the index
/// in clock order (the document integrates no block after a gap), so recording is a push or
/// the extension of the last span; lookups are binary searches.
type Spans = Vec<Span>;

/// The place of every item a room's document holds (by id ranges), and the ranges it deleted.
/// Memory: one span per run of a client's consecutive items with the same place.
#[derive(Default)]
pub(crate) struct RootIndex {
    items: HashMap<u64, Spans>,
    /// Deleted ranges (any root), merged: a peer's delete set repeats every delete it knows.
    deleted: HashMap<u64, BTreeMap<u32, u32>>,
    /// Built from the whole document (at a room's first peer update); until then the room's
    /// own updates are not recorded either, since the whole document will include them.
    built: bool,
}

impl RootIndex {
    /// Whether it holds the whole document.
    pub(crate) fn is_built(&self) -> bool {
        self.built
    }

    /// Marks it built (the whole document was recorded).
    pub(crate) fn mark_built(&mut self) {
        self.built = true;
    }

    /// The place of the item holding `id`, if the index has it.
    fn place(&self, (client, clock): Id) -> Option<Place> {
        let spans = self.items.get(&client)?;
        let at = spans.partition_point(|s| s.start <= clock).checked_sub(1)?;
        let span = spans.get(at)?;
        (clock < span.end).then_some(span.place)
    }

    /// Records what a walked update (one the document integrated) holds.
    pub(crate) fn record(&mut self, items: &[WalkedItem], deletes: &[DeleteRange]) {
        let places = resolve(items, self);
        for (item, place) in items.iter().zip(places) {
            if let Some(place) = place {
                self.insert(item.client, item.start, item.end, place);
            }
        }
        for range in deletes {
            insert_range(
                self.deleted.entry(range.client).or_default(),
                range.start,
                range.end,
            );
        }
    }

    fn insert(&mut self, client: u64, start: u32, end: u32, place: Place) {
        if start >= end {
            return;
        }
        let spans = self.items.entry(client).or_default();
        match spans.last_mut() {
            // After everything indexed of the client: extend the last span (typing, a
            // stroke) or start one.
            Some(last) if last.end == start && last.place == place => last.end = end,
            Some(last) if last.end <= start => spans.push(Span { start, end, place }),
            None => spans.push(Span { start, end, place }),
            // Clocks already indexed (a repeat, which yrs ignores) or, were it ever to happen,
            // an earlier gap being filled: only the clocks no span holds are added.
            Some(_) => {
                let at = spans.partition_point(|s| s.start <= start);
                let from = at
                    .checked_sub(1)
                    .and_then(|i| spans.get(i))
                    .map_or(start, |prev| prev.end.max(start));
                let to = spans.get(at).map_or(end, |next| next.start.min(end));
                if from < to {
                    spans.insert(
                        at,
                        Span {
                            start: from,
                            end: to,
                            place,
                        },
                    );
                }
            }
        }
    }

    /// Why a peer's walked update must be refused, if it must. `known` is the room's state
    /// vector: blocks the room has already (a client's sync step 2 repeats what it received
    /// since the room's step 1) and deletes it has made are no write of the peer's.
    pub(crate) fn check(
        &self,
        items: &[WalkedItem],
        deletes: &[DeleteRange],
        known: &yrs::StateVector,
    ) -> Option<Violation> {
        let places = resolve(items, self);
        let mut too_deep = false;
        for (item, place) in items.iter().zip(places) {
            let room_clock = known.get(&yrs::block::ClientID::new(item.client));
            if item.end <= room_clock {
                continue;
            }
            if let Some(place) = place {
                if let Some(root) = place.root {
                    return Some(Violation::ServerOwned(root));
                }
                too_deep |= place.level > MAX_NESTING;
            }
        }
        for range in deletes {
            if let Some(root) = self.owned_undeleted(range) {
                return Some(Violation::ServerOwned(root));
            }
        }
        too_deep.then_some(Violation::TooDeep)
    }

    /// The server-owned root of an item in `range` the room has not deleted, if any.
    fn owned_undeleted(&self, range: &DeleteRange) -> Option<ServerRoot> {
        if range.start >= range.end {
            return None;
        }
        let spans = self.items.get(&range.client)?;
        let first = spans.partition_point(|s| s.end <= range.start);
        let deleted = self.deleted.get(&range.client);
        for span in spans[first..].iter().take_while(|s| s.start < range.end) {
            let Some(root) = span.place.root else {
                continue;
            };
            let (from, to) = (span.start.max(range.start), span.end.min(range.end));
            if from < to && !deleted.is_some_and(|d| covers(d, from, to)) {
                return Some(root);
            }
        }
        None
    }
}

/// Adds `start..end` to merged ranges.
fn insert_range(ranges: &mut BTreeMap<u32, u32>, mut start: u32, mut end: u32) {
    if start >= end {
        return;
    }
    if let Some((&s, &e)) = ranges.range(..=start).next_back()
        && e >= start
    {
        start = s;
        end = end.max(e);
    }
    let overlapping: Vec<u32> = ranges.range(start..=end).map(|(s, _)| *s).collect();
    for s in overlapping {
        if let Some(e) = ranges.remove(&s) {
            end = end.max(e);
        }
    }
    ranges.insert(start, end);
}

/// Whether merged ranges cover all of `start..end`.
fn covers(ranges: &BTreeMap<u32, u32>, start: u32, end: u32) -> bool {
    ranges
        .range(..=start)
        .next_back()
        .is_some_and(|(_, &e)| e >= end)
}

/// Resolution state of one walked item.
#[derive(Clone, Copy)]
enum State {
    Unvisited,
    InProgress,
    Done(Option<Place>),
}

/// The place of each walked item: through the index for what the room has, through the
/// update's own items otherwise (in any order: an item may depend on a client listed later).
/// Iterative, so a chain of 20,000 nested maps costs no stack; a cycle leaves its items
/// unplaced (yrs keeps them pending).
fn resolve(items: &[WalkedItem], index: &RootIndex) -> Vec<Option<Place>> {
    // The update's items by client, in clock order.
    let mut by_client: HashMap<u64, Vec<usize>> = HashMap::new();
    for (i, item) in items.iter().enumerate() {
        by_client.entry(item.client).or_default().push(i);
    }
    for list in by_client.values_mut() {
        list.sort_by_key(|&i| items[i].start);
    }
    let find = |(client, clock): Id| -> Option<usize> {
        let list = by_client.get(&client)?;
        let at = list.partition_point(|&i| items[i].end <= clock);
        let &i = list.get(at)?;
        (items[i].start <= clock).then_some(i)
    };
    let mut states = vec![State::Unvisited; items.len()];
    enum Step {
        Done(Option<Place>),
        Need(usize),
    }
    // One attempt at an item: done, or the update's item it waits for.
    let attempt = |i: usize, states: &[State]| -> Step {
        let (candidates, nested) = match &items[i].link {
            Link::Root(root) => {
                return Step::Done(Some(Place {
                    root: *root,
                    level: 1,
                }));
            }
            Link::Parent(id) => ([Some(*id), None], true),
            Link::Origins(left, right) => ([*left, *right], false),
        };
        for id in candidates.into_iter().flatten() {
            let found = match index.place(id) {
                Some(place) => Some(place),
                None => match find(id) {
                    Some(j) => match states[j] {
                        State::Done(place) => place,
                        State::Unvisited => return Step::Need(j),
                        State::InProgress => None,
                    },
                    None => None,
                },
            };
            if let Some(place) = found {
                let level = if nested {
                    place.level.saturating_add(1)
                } else {
                    place.level
                };
                return Step::Done(Some(Place { level, ..place }));
            }
        }
        Step::Done(None)
    };
    for first in 0..items.len() {
        let mut stack = vec![first];
        while let Some(&top) = stack.last() {
            if let State::Done(_) = states[top] {
                stack.pop();
                continue;
            }
            states[top] = State::InProgress;
            match attempt(top, &states) {
                Step::Done(place) => {
                    states[top] = State::Done(place);
                    stack.pop();
                }
                Step::Need(j) => stack.push(j),
            }
        }
    }
    states
        .into_iter()
        .map(|state| match state {
            State::Done(place) => place,
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(client: u64, start: u32, end: u32, link: Link) -> WalkedItem {
        WalkedItem {
            client,
            start,
            end,
            link,
        }
    }

    #[test]
    fn roots_are_found_through_parents_and_origins_in_any_order() {
        // Client 9's entry under `tasks`, then (listed first) client 5's map inside it and an
        // entry beside that map (origin), and a shape of client 5.
        let items = vec![
            item(5, 0, 1, Link::Parent((9, 0))),
            item(5, 1, 3, Link::Origins(Some((5, 0)), None)),
            item(5, 3, 4, Link::Root(None)),
            item(9, 0, 1, Link::Root(Some(ServerRoot::Tasks))),
        ];
        let places = resolve(&items, &RootIndex::default());
        let tasks = |level| {
            Some(Place {
                root: Some(ServerRoot::Tasks),
                level,
            })
        };
        assert_eq!(
            places,
            vec![
                tasks(2),
                tasks(2),
                Some(Place {
                    root: None,
                    level: 1
                }),
                tasks(1)
            ]
        );
    }

    #[test]
    fn a_cycle_is_left_unplaced_and_a_deep_chain_costs_no_stack() {
        let cycle = vec![
            item(5, 0, 1, Link::Origins(Some((6, 0)), None)),
            item(6, 0, 1, Link::Origins(Some((5, 0)), None)),
        ];
        assert_eq!(resolve(&cycle, &RootIndex::default()), vec![None, None]);
        let mut chain = vec![item(5, 0, 1, Link::Root(None))];
        chain.extend((1..100_000).map(|i| item(5, i, i + 1, Link::Parent((5, i - 1)))));
        chain.reverse();
        let places = std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn(move || resolve(&chain, &RootIndex::default()))
            .expect("thread")
            .join()
            .expect("no stack overflow");
        assert_eq!(places[0].map(|p| p.level), Some(u16::MAX), "saturates");
    }

    /// Through a real room: the server's own writes are indexed as they happen; a peer that
    /// repeats them (a sync step 2 holding what it heard since) or their deletes passes; a peer
    /// that writes, edits or deletes under `fairies` is refused whole with 1008, and one that
    /// nests shared types too deep in `shapes` with 1007.
    #[test]
    fn lookalikes_of_server_roots_are_server_roots() {
        for name in ["Fairies", "fairies ", " FAIRIES\t", "fairies\u{0}", "Meta"] {
            assert!(ServerRoot::of(name).is_some(), "{name:?}");
        }
        for name in ["shapes", "pages", "fairies2", "my fairies"] {
            assert_eq!(ServerRoot::of(name), None, "{name:?}");
        }
    }

    #[tokio::test]
    async fn a_room_refuses_peers_writes_under_server_owned_roots() {
        use crate::ids::RoomName;
        use crate::room::{PeerInfo, RoomConfig, Rooms};
        use yrs::updates::decoder::Decode;
        use yrs::{
            Array, ArrayPrelim, Doc, Map, MapPrelim, Out, ReadTxn, Transact, Update, WriteTxn,
        };

        let store: std::sync::Arc<dyn crate::store::Store> =
            std::sync::Arc::new(crate::store::memory::MemoryStore::default());
        let config = RoomConfig::from_serve(&crate::config::ServeConfig::for_test());
        let rooms = Rooms::new(store, config, 4);
        let room = rooms
            .get(&RoomName::parse("owned").unwrap_or_else(|e| panic!("{e}")))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        {
            let fairies = room.doc().get_or_insert_map("fairies");
            let mut txn = room.doc().transact_mut();
            let fairy = fairies.insert(&mut txn, "f-a", MapPrelim::from([("name", "Ash")]));
            let chat = fairy.insert(&mut txn, "chat", ArrayPrelim::default());
            chat.push_back(&mut txn, "hi");
            chat.push_back(&mut txn, "there");
        }
        {
            // The server deletes a chat line: a peer's delete set will repeat it.
            let mut txn = room.doc().transact_mut();
            if let Some(Out::YMap(fairy)) = txn.get_map("fairies").and_then(|f| f.get(&txn, "f-a"))
                && let Some(Out::YArray(chat)) = fairy.get(&txn, "chat")
            {
                chat.remove(&mut txn, 1);
            }
        }
        let info = |conn| PeerInfo {
            conn,
            name: None,
            sub: format!("u{conn}"),
            can_write: true,
        };
        let state = room
            .doc()
            .transact()
            .encode_state_as_update_v1(&yrs::StateVector::default());
        // A peer holding the room's whole state, edits applied on a copy, sent as a diff.
        let send = |edit: &dyn Fn(&mut yrs::TransactionMut)| {
            let peer = Doc::with_client_id(77);
            peer.transact_mut()
                .apply_update(Update::decode_v1(&state).unwrap_or_else(|e| panic!("{e}")))
                .unwrap_or_else(|e| panic!("{e}"));
            let before = peer.transact().state_vector();
            edit(&mut peer.transact_mut());
            // Everything the peer has (what a sync step 2 to an empty state vector holds),
            // and the diff alone.
            let txn = peer.transact();
            (
                txn.encode_state_as_update_v1(&yrs::StateVector::default()),
                txn.encode_diff_v1(&before),
            )
        };
        let fairy = |txn: &mut yrs::TransactionMut| match txn
            .get_map("fairies")
            .and_then(|f| f.get(txn, "f-a"))
        {
            Some(Out::YMap(m)) => m,
            _ => panic!("the fairy"),
        };
        let (whole, _) = send(&|_| {});
        let (peer, _rx) = room.join(info(1)).unwrap_or_else(|e| panic!("{e}"));
        peer.handle(&crate::protocol::update(whole))
            .await
            .unwrap_or_else(|e| panic!("a repeat is refused: {e}"));
        let attacks: [&dyn Fn(&mut yrs::TransactionMut); 4] = [
            &|txn| {
                fairy(txn).insert(txn, "name", "Forged");
            },
            &|txn| {
                if let Some(Out::YArray(chat)) = fairy(txn).get(txn, "chat") {
                    chat.remove(txn, 0);
                }
            },
            &|txn| {
                if let Some(Out::YArray(chat)) = fairy(txn).get(txn, "chat") {
                    chat.push_back(txn, "forged");
                }
            },
            &|txn| {
                txn.get_or_insert_map("fairies").remove(txn, "f-a");
            },
        ];
        let before = room
            .doc()
            .transact()
            .encode_state_as_update_v1(&yrs::StateVector::default());
        for (i, attack) in attacks.into_iter().enumerate() {
            let (_, diff) = send(attack);
            let (peer, _rx) = room
                .join(info(10 + i as u64))
                .unwrap_or_else(|e| panic!("{e}"));
            let error = peer
                .handle(&crate::protocol::update(diff))
                .await
                .expect_err("refused");
            let (code, metric, reason) = crate::server::error::close_for(&error);
            assert_eq!((code, metric), (1008, "server_owned_root"), "attack {i}");
            assert!(reason.contains("`fairies`"), "attack {i}: {reason}");
        }
        let after = room
            .doc()
            .transact()
            .encode_state_as_update_v1(&yrs::StateVector::default());
        assert_eq!(before, after, "no attack reached the document");
        let (_, deep) = send(&|txn| {
            let shapes = txn.get_or_insert_map("shapes");
            let mut map = shapes.insert(txn, "deep", MapPrelim::default());
            for _ in 0..MAX_NESTING {
                map = map.insert(txn, "k", MapPrelim::default());
            }
        });
        let (peer, _rx) = room.join(info(30)).unwrap_or_else(|e| panic!("{e}"));
        let error = peer
            .handle(&crate::protocol::update(deep))
            .await
            .expect_err("too deep");
        assert_eq!(crate::server::error::close_for(&error).0, 1007);
        let (_, fine) = send(&|txn| {
            let shapes = txn.get_or_insert_map("shapes");
            let mut map = shapes.insert(txn, "fine", MapPrelim::default());
            for _ in 2..MAX_NESTING {
                map = map.insert(txn, "k", MapPrelim::default());
            }
        });
        peer.handle(&crate::protocol::update(fine))
            .await
            .unwrap_or_else(|e| panic!("{MAX_NESTING} levels refused: {e}"));
        drop(peer);
        rooms.shutdown().await;
    }

    #[test]
    fn deletes_of_owned_items_are_violations_unless_the_room_made_them() {
        let mut index = RootIndex::default();
        index.record(
            &[
                item(1, 0, 4, Link::Root(Some(ServerRoot::Fairies))),
                item(1, 4, 6, Link::Root(None)),
            ],
            &[],
        );
        let known = yrs::StateVector::default();
        let delete = |start, end| DeleteRange {
            client: 1,
            start,
            end,
        };
        assert_eq!(
            index.check(&[], &[delete(2, 3)], &known),
            Some(Violation::ServerOwned(ServerRoot::Fairies))
        );
        assert_eq!(index.check(&[], &[delete(4, 6)], &known), None);
        index.record(&[], &[delete(0, 3)]);
        assert_eq!(index.check(&[], &[delete(1, 3)], &known), None);
        assert_eq!(
            index.check(&[], &[delete(1, 5)], &known),
            Some(Violation::ServerOwned(ServerRoot::Fairies))
        );
    }
}
