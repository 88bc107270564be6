//! Fuzz check for `merge` (shared by the cargo-fuzz target, `tests/sync/fuzz_corpus.rs` and the
//! proptest in `tests/sync/canvas_merge.rs`): a model of one room with a server replica (where the
//! fairy lives) and one or two user replicas, driven by a list of [`Op`]s: user edits (create,
//! move, recolor, text, delete) of their own shapes, a fairy's streamed episodes (tentative
//! versions, then complete or cancelled), and update deliveries interleaved in arbitrary order
//! across links (each link is FIFO, like a WebSocket).
//!
//! Invariants checked at the end (after the fairy's last episode ends and all links drain):
//! 1. all replicas converge (same shapes, property by property);
//! 2. the document equals the users' edits plus only the fairy's complete actions: every
//!    fairy shape equals its state in a fairy-only replay of the complete actions, and no
//!    shape stays locked;
//! 3. every user edit survives: each user shape holds exactly its owner's last write (the
//!    fairy's tentative versions of it were all reverted, and no revert overwrote a user value).
//!
//! Users edit only the shapes they created (so users never race each other on one key); the
//! fairy's tentative episodes on user shapes always end cancelled (an interrupted request).

#![allow(dead_code)]

use std::collections::{BTreeMap, VecDeque};

use fairyring::agent::actions::{ActionCtx, Registry};
use fairyring::agent::apply::tentative::Tentative;
use fairyring::canvas::format::to_simple;
use fairyring::canvas::shape::{
    Prop, delete_shape, list_shapes, read_shape, set_props, write_shape,
};
use fairyring::canvas::{Shape, ShapeProps};
use serde_json::{Value, json};
use yrs::updates::decoder::Decode;
use yrs::{Doc, Options, ReadTxn, StateVector, Transact, Update};

/// One step of a scenario.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// User `user` creates its shape slot `slot` (if it does not exist in its view).
    Create { user: u8, slot: u8 },
    /// User moves its shape to `x`.
    Move { user: u8, slot: u8, x: u8 },
    /// User recolors its shape.
    Recolor { user: u8, slot: u8, color: u8 },
    /// User relabels its shape.
    Text { user: u8, slot: u8, text: u8 },
    /// User deletes its shape.
    Delete { user: u8, slot: u8 },
    /// The fairy streams one more version of its current episode, or starts one (`kind`
    /// picks: create a fairy shape, move/recolor a user shape, move a fairy shape).
    FairyStep { kind: u8, target: u8, value: u8 },
    /// The fairy's current episode ends: completed (`commit`) or interrupted.
    FairyEnd { commit: bool },
    /// Delivers the next pending update of link `link` (the `pick`-th with unordered links).
    Deliver { link: u8, pick: u8 },
}

/// Client ids `1..=SERVER_CLIENT_IDS` are the server's; users draw theirs above.
const SERVER_CLIENT_IDS: u64 = 16;

const COLORS: &[&str] = &["red", "blue", "green", "orange"];

/// Decodes bytes into ops, three bytes each.
pub fn decode(data: &[u8]) -> Vec<Op> {
    data.chunks_exact(3)
        .take(400)
        .map(|c| {
            let (k, a, b) = (c[0], c[1], c[2]);
            match k % 10 {
                0 => Op::Create { user: a, slot: b },
                1 => Op::Move {
                    user: a,
                    slot: a >> 4,
                    x: b,
                },
                2 => Op::Recolor {
                    user: a,
                    slot: a >> 4,
                    color: b,
                },
                3 => Op::Text {
                    user: a,
                    slot: a >> 4,
                    text: b,
                },
                4 => Op::Delete {
                    user: a,
                    slot: a >> 4,
                },
                5 | 6 => Op::FairyStep {
                    kind: k >> 4,
                    target: a,
                    value: b,
                },
                7 => Op::FairyEnd { commit: a % 4 != 0 },
                _ => Op::Deliver { link: a, pick: b },
            }
        })
        .collect()
}

#[derive(Debug, Clone)]
enum Episode {
    /// Creating fairy shape `id`; `versions` streamed so far.
    Create {
        id: String,
        versions: u32,
        last: Value,
    },
    /// Tentatively editing user shape `id` (always cancelled in the end).
    EditUser { last: Value },
    /// Moving fairy shape `id`.
    MoveOwn { last: Value },
}

struct Room {
    /// 0 is the server; 1.. are users.
    docs: Vec<Doc>,
    /// `links[2*u]`: user u+1 → server; `links[2*u+1]`: server → user u+1.
    links: Vec<VecDeque<Vec<u8>>>,
    registry: Registry,
    ctx: ActionCtx,
    tentative: Tentative,
    episode: Option<Episode>,
    next_fairy_shape: u32,
    /// Complete fairy actions, in order.
    complete: Vec<Value>,
    /// Deliver any pending update of a link, not only the oldest.
    unordered: bool,
    /// The users' own view of their shapes: id → (x, color, text), `None` once deleted.
    expected: BTreeMap<String, Option<(f64, String, String)>>,
}

fn diff_since(doc: &Doc, before: &StateVector) -> Vec<u8> {
    doc.transact().encode_state_as_update_v1(before)
}

fn shape_slot(user: u8, slot: u8) -> String {
    format!("u{user}_{}", slot % 3)
}

impl Room {
    fn new(users: usize, client_base: u64, unordered: bool) -> Self {
        // The server's client id is below every user's (see `run`): with YATA's tie-break a
        // user's write that is concurrent with a fairy's write (or with its revert) then wins.
        let docs: Vec<Doc> = (0..=users)
            .map(|i| {
                let id = if i == 0 {
                    1 + client_base % SERVER_CLIENT_IDS
                } else {
                    SERVER_CLIENT_IDS
                        + 1
                        + client_base.wrapping_mul(i as u64 * 7919) % 4_000_000_000
                };
                Doc::with_options(Options {
                    client_id: yrs::ClientID::new(id),
                    ..Options::default()
                })
            })
            .collect();
        let server = &docs[0];
        fairyring::canvas::init_schema(server, "system");
        let init = diff_since(server, &StateVector::default());
        for d in &docs[1..] {
            if let Ok(u) = Update::decode_v1(&init) {
                let _ = d.transact_mut_with("sync").apply_update(u);
            }
        }
        let tentative = Tentative::new(server, "f");
        Room {
            links: vec![VecDeque::new(); users * 2],
            docs,
            registry: Registry::canvas(),
            ctx: ActionCtx::new("f"),
            tentative,
            episode: None,
            next_fairy_shape: 0,
            complete: Vec::new(),
            expected: BTreeMap::new(),
            unordered,
        }
    }

    fn users(&self) -> usize {
        self.docs.len() - 1
    }

    /// Broadcasts what the server produced since `before` to every user link.
    fn server_emit(&mut self, before: &StateVector) {
        let update = diff_since(&self.docs[0], before);
        for u in 0..self.users() {
            self.links[2 * u + 1].push_back(update.clone());
        }
    }

    fn user_edit(&mut self, user: u8, slot: u8, f: impl FnOnce(&str, Option<Shape>) -> Edit) {
        let u = user as usize % self.users();
        let doc = self.docs[u + 1].clone();
        let id = shape_slot(u as u8, slot);
        let before = doc.transact().state_vector();
        let current = read_shape(&doc.transact(), &id).ok().flatten();
        let origin = format!("client:{}:user{u}", u + 1);
        match f(&id, current) {
            Edit::Write(s, field) => {
                // A client sets only the property it edits (its view may transiently lack
                // others when updates arrive out of order).
                let mut txn = doc.transact_mut_with(origin.as_str());
                match field {
                    Field::All => {
                        write_shape(&mut txn, &s);
                    }
                    Field::X => {
                        set_props(&mut txn, &id, &[("x", Prop::Num(s.x))]);
                    }
                    Field::Color => {
                        set_props(&mut txn, &id, &[("color", Prop::Str(s.color.clone()))]);
                    }
                    Field::Text => {
                        let t = s.text().unwrap_or_default().to_owned();
                        set_props(&mut txn, &id, &[("text", Prop::Str(t))]);
                    }
                }
                drop(txn);
                let text = s.text().unwrap_or_default().to_owned();
                // Only what the user wrote is theirs: its view may show a fairy's tentative
                // value in the other fields.
                let prior = self.expected.get(&id).cloned().flatten();
                let next = match (field, prior) {
                    (Field::X, Some((_, c, t))) => (s.x, c, t),
                    (Field::Color, Some((x, _, t))) => (x, s.color.clone(), t),
                    (Field::Text, Some((x, c, _))) => (x, c, text),
                    _ => (s.x, s.color.clone(), text),
                };
                self.expected.insert(id, Some(next));
            }
            Edit::Delete => {
                delete_shape(&mut doc.transact_mut_with(origin.as_str()), &id);
                self.expected.insert(id, None);
            }
            Edit::Nothing => return,
        }
        let update = diff_since(&doc, &before);
        self.links[2 * u].push_back(update);
    }

    fn deliver(&mut self, link: u8, pick: u8) {
        if self.links.is_empty() {
            return;
        }
        let l = link as usize % self.links.len();
        let q = &mut self.links[l];
        if q.is_empty() {
            return;
        }
        // WebSocket links are FIFO; `unordered` models links that reorder.
        let i = if self.unordered {
            pick as usize % q.len()
        } else {
            0
        };
        let Some(update) = q.remove(i) else { return };
        let user = l / 2;
        if l.is_multiple_of(2) {
            // user → server: apply with the user's origin, relay to the other users.
            let origin = format!("client:{}:user{user}", user + 1);
            if let Ok(u) = Update::decode_v1(&update) {
                let _ = self.docs[0]
                    .transact_mut_with(origin.as_str())
                    .apply_update(u);
            }
            for other in 0..self.users() {
                if other != user {
                    self.links[2 * other + 1].push_back(update.clone());
                }
            }
        } else if let Ok(u) = Update::decode_v1(&update) {
            let _ = self.docs[user + 1]
                .transact_mut_with("server")
                .apply_update(u);
        }
    }

    fn fairy_step(&mut self, kind: u8, target: u8, value: u8) {
        let before = self.docs[0].transact().state_vector();
        let v = value as f64;
        let action = match &self.episode {
            None => match kind % 3 {
                0 => {
                    let id = format!("f{}", self.next_fairy_shape);
                    self.next_fairy_shape += 1;
                    let a = json!({"_type": "create", "shape": {"_type": "rectangle", "shapeId": id, "x": v}});
                    self.episode = Some(Episode::Create {
                        id,
                        versions: 1,
                        last: a.clone(),
                    });
                    a
                }
                1 => {
                    let ids: Vec<String> = list_shapes(&self.docs[0].transact())
                        .into_iter()
                        .filter(|s| s.id.starts_with('u'))
                        .map(|s| s.id)
                        .collect();
                    let Some(id) = ids.get(target as usize % ids.len().max(1)).cloned() else {
                        return;
                    };
                    let a = if value.is_multiple_of(2) {
                        json!({"_type": "move", "shapeId": id, "x": v + 1000.0, "y": v})
                    } else {
                        json!({"_type": "update", "update": {"shapeId": id, "color": "violet", "text": format!("fairy {value}")}})
                    };
                    self.episode = Some(Episode::EditUser { last: a.clone() });
                    a
                }
                _ => {
                    let ids: Vec<String> = list_shapes(&self.docs[0].transact())
                        .into_iter()
                        .filter(|s| s.id.starts_with('f') && !s.locked)
                        .map(|s| s.id)
                        .collect();
                    let Some(id) = ids.get(target as usize % ids.len().max(1)).cloned() else {
                        return;
                    };
                    let a = json!({"_type": "move", "shapeId": id, "x": v * 3.0, "y": v});
                    self.episode = Some(Episode::MoveOwn { last: a.clone() });
                    a
                }
            },
            Some(Episode::Create { id, versions, .. }) => {
                let n = versions + 1;
                let a = json!({"_type": "create", "shape": {"_type": "rectangle", "shapeId": id, "x": v, "y": n, "w": 10 + n, "text": format!("v{n}")}});
                self.episode = Some(Episode::Create {
                    id: id.clone(),
                    versions: n,
                    last: a.clone(),
                });
                a
            }
            Some(Episode::EditUser { last }) => {
                let mut a = last.clone();
                if a.get("x").is_some() {
                    a["x"] = json!(v + 2000.0);
                } else {
                    a["update"]["text"] = json!(format!("fairy {value}"));
                }
                self.episode = Some(Episode::EditUser { last: a.clone() });
                a
            }
            Some(Episode::MoveOwn { last }) => {
                let mut a = last.clone();
                a["x"] = json!(v * 5.0);
                self.episode = Some(Episode::MoveOwn { last: a.clone() });
                a
            }
        };
        let _ = self
            .tentative
            .apply_tentative(&self.registry, &action, &mut self.ctx);
        self.server_emit(&before);
    }

    fn fairy_end(&mut self, commit: bool) {
        let Some(episode) = self.episode.take() else {
            return;
        };
        let before = self.docs[0].transact().state_vector();
        match (episode, commit) {
            (Episode::Create { last, .. } | Episode::MoveOwn { last }, true) => {
                if self
                    .tentative
                    .apply_complete(&self.registry, &last, &mut self.ctx)
                    .is_ok()
                {
                    self.complete.push(last);
                }
            }
            _ => {
                self.tentative.revert_tentative();
            }
        }
        self.server_emit(&before);
    }

    fn drain(&mut self) {
        // Bounded: each delivery removes one update and relays at most `users` new ones,
        // and relayed updates are never relayed again.
        for l in 0..self.links.len() {
            while !self.links[l].is_empty() {
                self.deliver(l as u8, 0);
            }
        }
        for l in 0..self.links.len() {
            while !self.links[l].is_empty() {
                self.deliver(l as u8, 0);
            }
        }
    }
}

#[derive(Clone, Copy)]
enum Field {
    All,
    X,
    Color,
    Text,
}

enum Edit {
    Write(Box<Shape>, Field),
    Delete,
    Nothing,
}

fn new_user_shape(id: String, x: f64) -> Shape {
    let base = fairyring::canvas::format::ShapeBase {
        created_by: "user:u".into(),
        ..Default::default()
    };
    let simple = json!({"_type": "rectangle", "shapeId": id, "x": x, "y": 500, "w": 40, "h": 40});
    match fairyring::canvas::format::from_simple(&simple, &base) {
        Ok(s) => s,
        Err(e) => panic!("model shape: {e}"),
    }
}

fn snapshot(doc: &Doc) -> BTreeMap<String, (Value, bool)> {
    list_shapes(&doc.transact())
        .into_iter()
        .map(|s| (s.id.clone(), (to_simple(&s), s.locked)))
        .collect()
}

/// Runs a scenario with `users` user replicas over FIFO links (interleaved at random across
/// links, as WebSockets deliver); `Err` describes a broken invariant.
pub fn run(ops: &[Op], users: usize, client_base: u64) -> Result<(), String> {
    run_with(ops, users, client_base, false)
}

/// [`run`] with links that may reorder updates (see `tests/sync/canvas_merge.rs` for why this is
/// not part of the checked properties: yrs 0.28.1 can keep a pending delete set forever).
pub fn run_unordered(ops: &[Op], users: usize, client_base: u64) -> Result<(), String> {
    run_with(ops, users, client_base, true)
}

fn run_with(ops: &[Op], users: usize, client_base: u64, unordered: bool) -> Result<(), String> {
    let mut room = Room::new(users.clamp(1, 2), client_base, unordered);
    for op in ops {
        match op.clone() {
            Op::Create { user, slot } => room.user_edit(user, slot, |id, cur| match cur {
                None => Edit::Write(
                    Box::new(new_user_shape(id.to_owned(), slot as f64 * 50.0)),
                    Field::All,
                ),
                Some(_) => Edit::Nothing,
            }),
            Op::Move { user, slot, x } => room.user_edit(user, slot, |_id, cur| match cur {
                Some(mut s) => {
                    s.x = x as f64;
                    Edit::Write(Box::new(s), Field::X)
                }
                None => Edit::Nothing,
            }),
            Op::Recolor { user, slot, color } => room.user_edit(user, slot, |_id, cur| match cur {
                Some(mut s) => {
                    s.color = COLORS[color as usize % COLORS.len()].into();
                    Edit::Write(Box::new(s), Field::Color)
                }
                None => Edit::Nothing,
            }),
            Op::Text { user, slot, text } => room.user_edit(user, slot, |_id, cur| match cur {
                Some(mut s) => {
                    s.set_text(format!("user text {text}"));
                    Edit::Write(Box::new(s), Field::Text)
                }
                None => Edit::Nothing,
            }),
            Op::Delete { user, slot } => room.user_edit(user, slot, |_id, cur| match cur {
                Some(_) => Edit::Delete,
                None => Edit::Nothing,
            }),
            Op::FairyStep {
                kind,
                target,
                value,
            } => room.fairy_step(kind, target, value),
            Op::FairyEnd { commit } => room.fairy_end(commit),
            Op::Deliver { link, pick } => room.deliver(link, pick),
        }
    }
    room.fairy_end(true);
    room.drain();

    // 1. Convergence.
    let server = snapshot(&room.docs[0]);

    for (i, d) in room.docs.iter().enumerate().skip(1) {
        let other = snapshot(d);
        if other != server {
            return Err(format!(
                "replica {i} diverged:\n{other:?}\nserver:\n{server:?}"
            ));
        }
    }
    // 2. Fairy shapes equal a fairy-only replay of the complete actions; nothing locked.
    let reference = Doc::new();
    fairyring::canvas::init_schema(&reference, "system");
    let mut ctx = ActionCtx::new("f");
    for a in &room.complete {
        if let Err(e) = room.registry.apply(&reference, a, &mut ctx) {
            return Err(format!("reference replay of {a} failed: {e}"));
        }
    }
    let expected_fairy = snapshot(&reference);
    for (id, (simple, locked)) in &server {
        if *locked {
            return Err(format!("shape {id} is still locked"));
        }
        if id.starts_with('f') && expected_fairy.get(id).map(|e| &e.0) != Some(simple) {
            return Err(format!(
                "fairy shape {id} is {simple}, expected {:?}",
                expected_fairy.get(id)
            ));
        }
    }
    for id in expected_fairy.keys() {
        if !server.contains_key(id) {
            return Err(format!("fairy shape {id} is missing"));
        }
    }
    // 3. Every user shape holds its owner's last write.
    for (id, want) in &room.expected {
        let got = server.get(id).map(|(v, _)| v);
        match (want, got) {
            (None, None) => {}
            (Some((x, color, text)), Some(v)) => {
                let ok = v["x"].as_f64() == Some(*x)
                    && v["color"].as_str() == Some(color)
                    && v["text"].as_str() == Some(text);
                if !ok {
                    return Err(format!(
                        "user shape {id} is {v}, its owner last wrote x={x} color={color} text={text:?}"
                    ));
                }
            }
            _ => return Err(format!("user shape {id}: expected {want:?}, found {got:?}")),
        }
    }
    for id in server.keys() {
        if id.starts_with('u') && !room.expected.contains_key(id) {
            return Err(format!("unexpected user shape {id}"));
        }
    }
    let _ = ShapeProps::Note {
        text: String::new(),
    };
    Ok(())
}

/// Must never panic, whatever the bytes; panics only on a broken invariant.
pub fn check(data: &[u8]) {
    let (users, base) = match data.first() {
        Some(b) => (1 + (*b as usize % 2), *b as u64 * 31),
        None => (1, 0),
    };
    let ops = decode(data.get(1..).unwrap_or_default());
    if let Err(e) = run(&ops, users, base) {
        panic!("merge invariant broken: {e}\nops: {ops:?}");
    }
}
