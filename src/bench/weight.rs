//! What a room's encoded document is made of: the whole document as one Yjs v1 update (what
//! `GET /rooms/{room}/doc?format=yjs` answers, and what a room stores as its snapshot) read
//! struct by struct, each byte put in one part: a live shape's key, a value written over inside
//! a live shape (its tombstone), a deleted shape, a garbage-collected range, the delete set's
//! ranges, the other roots. A change meant to make rooms lighter can then say where its bytes
//! went (`fairyring bench --fairies` reports it under `rooms_after.parts`;
//! docs/benchmarks.md, "2026-11-28 — s54-size").
//!
//! Owns the reading of the v1 encoding (lib0's: the structs of each client, then the delete
//! set) for this purpose only: nothing is applied, and content kinds rooms never hold (weak
//! links) are an error.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Value, json};
use yrs::Any;
use yrs::encoding::read::{Cursor, Read};

/// Why a document could not be weighed.
#[derive(Debug, thiserror::Error)]
pub enum WeightError {
    /// The bytes end early or hold a value that does not decode.
    #[error("malformed update: {0}")]
    Malformed(#[from] yrs::encoding::read::Error),
    /// A content or type kind rooms never hold.
    #[error("unsupported content kind {0}")]
    Unsupported(u8),
}

/// Bytes of one part and how many structs (or delete-set ranges) they are.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Part {
    /// Structs, or ranges for the delete set.
    pub count: usize,
    /// Encoded bytes.
    pub bytes: usize,
}

/// A document's encoded bytes by part; the parts add up to the whole.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Breakdown {
    /// The update's length.
    pub total: usize,
    /// Label → part. Labels are `SECTION: WHAT`; sections are `shapes (fairies')`,
    /// `shapes (people's)` (by the live shape's `createdBy`; a deleted copy under a live key is
    /// its owner's), `shapes (deleted, fairies' writer)` and `shapes (deleted, others)` (keys
    /// no live shape holds, by who wrote them: the clients that wrote the fairies' live shapes,
    /// or others), each other root by name, `gc (fairies' writer)`, `gc (others)`,
    /// `delete set (SECTION)` (each range by its first item), `headers` and `unknown`.
    pub parts: BTreeMap<String, Part>,
    /// Live shapes by creator: the fairies' (`createdBy` `fairy:…`) and the others.
    pub fairy_shapes: usize,
    /// Live shapes not created by a fairy.
    pub other_shapes: usize,
}

impl Breakdown {
    /// Reads `update` (a whole document, Yjs v1).
    pub fn of_update(update: &[u8]) -> Result<Breakdown, WeightError> {
        let decoded = decode(update)?;
        Ok(Weigher::new(decoded).weigh(update.len()))
    }

    /// Bytes per section (the label before `: `).
    pub fn sections(&self) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        for (label, part) in &self.parts {
            let section = label.split(": ").next().unwrap_or(label);
            *out.entry(section.to_owned()).or_default() += part.bytes;
        }
        out
    }

    /// Bytes of every part whose label starts with `prefix`.
    pub fn bytes_of(&self, prefix: &str) -> usize {
        self.parts
            .iter()
            .filter(|(label, _)| label.starts_with(prefix))
            .map(|(_, part)| part.bytes)
            .sum()
    }

    /// What the fairies' work left: the sections of their shapes, of what their writer deleted
    /// for good or garbage-collected, of the server-written roots (`fairies`, `tasks`,
    /// `projects`, `suggestions`), and those sections' delete-set ranges.
    pub fn fairy_bytes(&self) -> usize {
        const FAIRY_SECTIONS: [&str; 7] = [
            "shapes (fairies')",
            "shapes (deleted, fairies' writer)",
            "gc (fairies' writer)",
            "fairies",
            "tasks",
            "projects",
            "suggestions",
        ];
        self.sections()
            .iter()
            .filter(|(section, _)| {
                let of = section
                    .strip_prefix("delete set (")
                    .and_then(|s| s.strip_suffix(')'))
                    .unwrap_or(section);
                FAIRY_SECTIONS.contains(&of)
            })
            .map(|(_, bytes)| bytes)
            .sum()
    }

    /// Adds another document's parts (rooms summed).
    pub fn add(&mut self, other: &Breakdown) {
        self.total += other.total;
        self.fairy_shapes += other.fairy_shapes;
        self.other_shapes += other.other_shapes;
        for (label, part) in &other.parts {
            let mine = self.parts.entry(label.clone()).or_default();
            mine.count += part.count;
            mine.bytes += part.bytes;
        }
    }

    /// As JSON: `{total, sections, parts: {LABEL: {count, bytes}}}`.
    pub fn report(&self) -> Value {
        let parts: serde_json::Map<String, Value> = self
            .parts
            .iter()
            .map(|(label, p)| (label.clone(), json!({"count": p.count, "bytes": p.bytes})))
            .collect();
        json!({"total": self.total, "sections": self.sections(), "parts": parts})
    }

    /// One line per part, largest first (for test output and the benchmarks log).
    pub fn table(&self) -> String {
        let mut rows: Vec<_> = self.parts.iter().collect();
        rows.sort_by(|a, b| b.1.bytes.cmp(&a.1.bytes).then(a.0.cmp(b.0)));
        let mut out = format!(
            "{} B, {} fairy shapes, {} others\n",
            self.total, self.fairy_shapes, self.other_shapes
        );
        for (label, part) in rows {
            out.push_str(&format!(
                "{:>8} B {:>6}x  {label}\n",
                part.bytes, part.count
            ));
        }
        out
    }
}

type Id = (u64, u32);

/// Where an item's parent is named.
#[derive(Debug, Clone)]
enum Parent {
    Root(String),
    Item(Id),
    /// From its origin (or right origin): a sibling's parent and key.
    Sibling,
}

/// What an item holds, as far as weighing needs.
#[derive(Debug, Clone, PartialEq)]
enum Content {
    Deleted,
    Type,
    /// One string value (a shape's `createdBy` is read from it).
    Text(String),
    Other,
}

#[derive(Debug, Clone)]
struct Block {
    id: Id,
    len: u32,
    gc: bool,
    origin: Option<Id>,
    right: Option<Id>,
    parent: Parent,
    key: Option<String>,
    content: Content,
    bytes: usize,
}

struct Decoded {
    blocks: Vec<Block>,
    /// `(client, clock, len, bytes)` of each delete-set range.
    deleted: Vec<(u64, u32, u32, usize)>,
    headers: usize,
}

fn read_id(cursor: &mut Cursor<'_>) -> Result<Id, WeightError> {
    let client: u64 = cursor.read_var()?;
    let clock: u32 = cursor.read_var()?;
    Ok((client, clock))
}

fn decode(update: &[u8]) -> Result<Decoded, WeightError> {
    let mut cursor = Cursor::new(update);
    let mut blocks = Vec::new();
    let mut headers = 0;
    let mut at = cursor.next;
    let clients: u32 = cursor.read_var()?;
    headers += cursor.next - at;
    for _ in 0..clients {
        at = cursor.next;
        let structs: u32 = cursor.read_var()?;
        let client: u64 = cursor.read_var()?;
        let mut clock: u32 = cursor.read_var()?;
        headers += cursor.next - at;
        for _ in 0..structs {
            at = cursor.next;
            let info = cursor.read_u8()?;
            let mut block = Block {
                id: (client, clock),
                len: 1,
                gc: false,
                origin: None,
                right: None,
                parent: Parent::Sibling,
                key: None,
                content: Content::Other,
                bytes: 0,
            };
            match info & 0x1f {
                0 => {
                    block.len = cursor.read_var()?;
                    block.gc = true;
                }
                10 => {
                    // A skip: a gap in this update, no struct of the document.
                    let len: u32 = cursor.read_var()?;
                    clock += len;
                    headers += cursor.next - at;
                    continue;
                }
                kind => {
                    if info & 0x80 != 0 {
                        block.origin = Some(read_id(&mut cursor)?);
                    }
                    if info & 0x40 != 0 {
                        block.right = Some(read_id(&mut cursor)?);
                    }
                    if info & 0xc0 == 0 {
                        let named: u32 = cursor.read_var()?;
                        block.parent = if named == 1 {
                            Parent::Root(cursor.read_string()?.to_owned())
                        } else {
                            Parent::Item(read_id(&mut cursor)?)
                        };
                        if info & 0x20 != 0 {
                            block.key = Some(cursor.read_string()?.to_owned());
                        }
                    }
                    (block.len, block.content) = read_content(&mut cursor, kind)?;
                }
            }
            block.bytes = cursor.next - at;
            clock += block.len;
            blocks.push(block);
        }
    }
    let mut deleted = Vec::new();
    at = cursor.next;
    let clients: u32 = cursor.read_var()?;
    headers += cursor.next - at;
    for _ in 0..clients {
        at = cursor.next;
        let client: u64 = cursor.read_var()?;
        let ranges: u32 = cursor.read_var()?;
        headers += cursor.next - at;
        for _ in 0..ranges {
            at = cursor.next;
            let clock: u32 = cursor.read_var()?;
            let len: u32 = cursor.read_var()?;
            deleted.push((client, clock, len, cursor.next - at));
        }
    }
    headers += update.len() - cursor.next;
    Ok(Decoded {
        blocks,
        deleted,
        headers,
    })
}

/// An item's content (v1): its clock length and what weighing needs of it.
fn read_content(cursor: &mut Cursor<'_>, kind: u8) -> Result<(u32, Content), WeightError> {
    Ok(match kind {
        1 => (cursor.read_var()?, Content::Deleted),
        2 => {
            let n: u32 = cursor.read_var()?;
            for _ in 0..n {
                cursor.read_string()?;
            }
            (n, Content::Other)
        }
        3 => {
            cursor.read_buf()?;
            (1, Content::Other)
        }
        4 => {
            let text = cursor.read_string()?;
            let len = text.encode_utf16().count() as u32;
            (len, Content::Other)
        }
        5 => {
            cursor.read_string()?;
            (1, Content::Other)
        }
        6 => {
            cursor.read_string()?;
            cursor.read_string()?;
            (1, Content::Other)
        }
        7 => {
            let type_ref = cursor.read_u8()?;
            match type_ref {
                3 | 5 => {
                    cursor.read_string()?;
                }
                0 | 1 | 2 | 4 | 6 | 9 | 15 => {}
                other => return Err(WeightError::Unsupported(other)),
            }
            (1, Content::Type)
        }
        8 => {
            let n: u32 = cursor.read_var()?;
            let mut content = Content::Other;
            for _ in 0..n {
                if let Any::String(s) = Any::decode(cursor)?
                    && n == 1
                {
                    content = Content::Text(s.to_string());
                }
            }
            (n, content)
        }
        9 => {
            cursor.read_string()?;
            Any::decode(cursor)?;
            (1, Content::Other)
        }
        other => return Err(WeightError::Unsupported(other)),
    })
}

/// Where an item sits: its root, the key in the root (a shape's id), the key at the second
/// level (a shape's property), its depth, and the indices of its parent and its level-1
/// ancestor.
#[derive(Debug, Clone)]
struct Place {
    root: String,
    top: Option<String>,
    sub: Option<String>,
    depth: u8,
    top_block: Option<usize>,
}

struct Weigher {
    decoded: Decoded,
    by_client: HashMap<u64, Vec<(u32, u32, usize)>>,
    places: Vec<Option<Option<Place>>>,
}

impl Weigher {
    fn new(decoded: Decoded) -> Self {
        let mut by_client: HashMap<u64, Vec<(u32, u32, usize)>> = HashMap::new();
        for (i, b) in decoded.blocks.iter().enumerate() {
            by_client
                .entry(b.id.0)
                .or_default()
                .push((b.id.1, b.len, i));
        }
        for ranges in by_client.values_mut() {
            ranges.sort_unstable();
        }
        let places = vec![None; decoded.blocks.len()];
        Weigher {
            decoded,
            by_client,
            places,
        }
    }

    /// The block holding `id`.
    fn find(&self, (client, clock): Id) -> Option<usize> {
        let ranges = self.by_client.get(&client)?;
        let after = ranges.partition_point(|&(start, _, _)| start <= clock);
        let &(start, len, i) = ranges.get(after.checked_sub(1)?)?;
        (clock < start + len).then_some(i)
    }

    fn place(&mut self, i: usize) -> Option<Place> {
        // Siblings (written over, or next in a list) share their place: follow the chain
        // without recursion (a key written over 10,000 times is a chain that long).
        let mut chain = Vec::new();
        let mut cur = i;
        let found = loop {
            if let Some(known) = &self.places[cur] {
                break known.clone();
            }
            chain.push(cur);
            let block = &self.decoded.blocks[cur];
            if block.gc || chain.len() > self.decoded.blocks.len() {
                break None;
            }
            match block.parent.clone() {
                Parent::Root(root) => {
                    break Some(Place {
                        root,
                        top: block.key.clone(),
                        sub: None,
                        depth: 1,
                        top_block: None,
                    });
                }
                Parent::Item(parent) => {
                    let key = block.key.clone();
                    let parent = self.find(parent);
                    // Provisionally placed nowhere: a parent chain that comes back here (only
                    // a malformed update has one) ends instead of recursing for ever.
                    for &c in &chain {
                        self.places[c] = Some(None);
                    }
                    break parent.and_then(|p| {
                        let above = self.place(p)?;
                        Some(Place {
                            root: above.root,
                            top: above.top,
                            sub: if above.depth == 1 { key } else { above.sub },
                            depth: above.depth.saturating_add(1),
                            top_block: above.top_block.or(Some(p)),
                        })
                    });
                }
                Parent::Sibling => {
                    match block.origin.or(block.right).and_then(|id| self.find(id)) {
                        Some(next) if next != cur => cur = next,
                        _ => break None,
                    }
                }
            }
        };
        for c in chain {
            self.places[c] = Some(found.clone());
        }
        found
    }

    fn is_deleted(&self, i: usize, ranges: &HashMap<u64, Vec<(u32, u32)>>) -> bool {
        let b = &self.decoded.blocks[i];
        let (client, clock) = b.id;
        let in_set = ranges.get(&client).is_some_and(|r| {
            let after = r.partition_point(|&(start, _)| start <= clock);
            after
                .checked_sub(1)
                .and_then(|k| r.get(k))
                .is_some_and(|&(start, len)| clock < start + len)
        });
        b.content == Content::Deleted || in_set
    }

    fn weigh(mut self, total: usize) -> Breakdown {
        let n = self.decoded.blocks.len();
        let places: Vec<Option<Place>> = (0..n).map(|i| self.place(i)).collect();
        let mut ranges: HashMap<u64, Vec<(u32, u32)>> = HashMap::new();
        for &(client, clock, len, _) in &self.decoded.deleted {
            ranges.entry(client).or_default().push((clock, len));
        }
        for r in ranges.values_mut() {
            r.sort_unstable();
        }
        let deleted: Vec<bool> = (0..n).map(|i| self.is_deleted(i, &ranges)).collect();
        // Live shapes (level-1 entries of `shapes`) and their creators.
        let mut fairy_shape: HashMap<usize, bool> = HashMap::new();
        let mut live_key_owner: HashMap<String, bool> = HashMap::new();
        for (i, place) in places.iter().enumerate() {
            let Some(place) = place else { continue };
            if place.root != "shapes" || place.depth != 2 || deleted[i] {
                continue;
            }
            if place.sub.as_deref() == Some("createdBy")
                && let (Some(top), Content::Text(by)) =
                    (place.top_block, &self.decoded.blocks[i].content)
                && !deleted[top]
            {
                fairy_shape.insert(top, by.starts_with("fairy:"));
            }
        }
        let mut out = Breakdown {
            total,
            ..Breakdown::default()
        };
        for (i, place) in places.iter().enumerate() {
            if let Some(p) = place
                && p.root == "shapes"
                && p.depth == 1
                && !deleted[i]
            {
                let fairy = fairy_shape.get(&i).copied().unwrap_or(false);
                if fairy {
                    out.fairy_shapes += 1;
                } else {
                    out.other_shapes += 1;
                }
                if let Some(key) = &p.top {
                    live_key_owner.insert(key.clone(), fairy);
                }
            }
        }
        // The clients that wrote the fairies' live shapes (the room's own): what they deleted
        // for good and garbage-collected is the fairies' work too (reverted previews).
        let fairy_writers: std::collections::HashSet<u64> = fairy_shape
            .iter()
            .filter(|&(_, &fairy)| fairy)
            .map(|(&i, _)| self.decoded.blocks[i].id.0)
            .collect();
        let by_fairies = |i: usize| fairy_writers.contains(&self.decoded.blocks[i].id.0);
        let owner = |fairy: bool| {
            if fairy {
                "shapes (fairies')"
            } else {
                "shapes (people's)"
            }
        };
        let mut labels: Vec<String> = Vec::with_capacity(n);
        for (i, place) in places.iter().enumerate() {
            let block = &self.decoded.blocks[i];
            let label = match place {
                _ if block.gc && by_fairies(i) => "gc (fairies' writer): ranges".to_owned(),
                _ if block.gc => "gc (others): ranges".to_owned(),
                None => "unknown".to_owned(),
                Some(p) if p.root == "shapes" => {
                    let shape_live = p.top_block.is_none_or(|t| !deleted[t]);
                    let section = match (p.depth, p.top_block) {
                        (1, _) if !deleted[i] => {
                            owner(fairy_shape.get(&i).copied().unwrap_or(false))
                        }
                        (_, Some(t)) if shape_live => {
                            owner(fairy_shape.get(&t).copied().unwrap_or(false))
                        }
                        _ => match p.top.as_ref().and_then(|k| live_key_owner.get(k)) {
                            // A deleted copy of a shape whose key a live shape holds again (a
                            // reverted preview, then the shape written anew).
                            Some(&fairy) => owner(fairy),
                            None if by_fairies(i) => "shapes (deleted, fairies' writer)",
                            None => "shapes (deleted, others)",
                        },
                    };
                    let what = match (p.depth, deleted[i], shape_live) {
                        (1, false, _) => "entry".to_owned(),
                        (1, true, _) => "entry deleted".to_owned(),
                        (_, _, false) => "inside a deleted entry".to_owned(),
                        (2, false, true) => format!("key {}", p.sub.as_deref().unwrap_or("?")),
                        (2, true, true) => {
                            format!("written over {}", p.sub.as_deref().unwrap_or("?"))
                        }
                        (_, gone, true) => format!(
                            "key {} nested{}",
                            p.sub.as_deref().unwrap_or("?"),
                            if gone { " deleted" } else { "" }
                        ),
                    };
                    format!("{section}: {what}")
                }
                Some(p) => format!(
                    "{}: {}",
                    p.root,
                    if deleted[i] { "deleted" } else { "live" }
                ),
            };
            let part = out.parts.entry(label.clone()).or_default();
            part.count += 1;
            part.bytes += block.bytes;
            labels.push(label);
        }
        for &(client, clock, _, bytes) in &self.decoded.deleted {
            let of = self
                .find((client, clock))
                .and_then(|i| labels.get(i))
                .map_or("unknown", |l| l.split(": ").next().unwrap_or(l));
            let part = out.parts.entry(format!("delete set ({of})")).or_default();
            part.count += 1;
            part.bytes += bytes;
        }
        if self.decoded.headers > 0 {
            let part = out.parts.entry("headers".to_owned()).or_default();
            part.count += 1;
            part.bytes += self.decoded.headers;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use yrs::{Doc, Map, MapPrelim, Transact, WriteTxn};

    fn encoded(doc: &Doc) -> Vec<u8> {
        use yrs::ReadTxn;
        doc.transact()
            .encode_state_as_update_v1(&yrs::StateVector::default())
    }

    #[test]
    fn every_byte_is_in_one_part() {
        let doc = Doc::with_client_id(1);
        {
            let mut txn = doc.transact_mut();
            let shapes = txn.get_or_insert_map("shapes");
            for (id, by) in [("a", "fairy:f1"), ("b", "user:ann"), ("c", "fairy:f1")] {
                let shape = MapPrelim::from([
                    ("id", Any::from(id)),
                    ("createdBy", by.into()),
                    ("x", 1.0.into()),
                ]);
                shapes.insert(&mut txn, id, shape);
            }
            let meta = txn.get_or_insert_map("meta");
            meta.insert(&mut txn, "schemaVersion", 2.0);
        }
        {
            // Written over twice, then a shape deleted for good.
            let mut txn = doc.transact_mut();
            let shapes = txn.get_or_insert_map("shapes");
            if let Some(yrs::Out::YMap(a)) = shapes.get(&txn, "a") {
                a.insert(&mut txn, "x", 2.0);
                a.insert(&mut txn, "x", 3.0);
            }
            shapes.remove(&mut txn, "c");
        }
        let update = encoded(&doc);
        let weight = Breakdown::of_update(&update);
        assert!(weight.is_ok(), "{weight:?}");
        let weight = weight.unwrap_or_default();
        eprintln!("{}", weight.table());
        let sum: usize = weight.parts.values().map(|p| p.bytes).sum();
        assert_eq!(sum, update.len(), "{}", weight.table());
        assert_eq!((weight.fairy_shapes, weight.other_shapes), (1, 1));
        let part = |label: &str| weight.parts.get(label).copied().unwrap_or_default();
        assert_eq!(part("shapes (fairies'): written over x").count, 2);
        assert_eq!(part("shapes (fairies'): key x").count, 1);
        assert_eq!(part("shapes (people's): key createdBy").count, 1);
        assert_eq!(
            part("shapes (deleted, fairies' writer): entry deleted").count,
            1
        );
        assert_eq!(part("meta: live").count, 1);
        assert!(
            part("gc (fairies' writer): ranges").count >= 1,
            "{}",
            weight.table()
        );
        assert!(weight.fairy_bytes() > 0 && weight.fairy_bytes() < update.len());
        assert!(weight.bytes_of("delete set (") > 0);
        assert!(Breakdown::of_update(b"\x05not a document").is_err());
        // An item naming itself as its parent: weighed as unknown, no endless recursion.
        let looped = [1, 1, 1, 0, 0x28, 0, 1, 0, 1, b'k', 1, 125, 0, 0];
        let weight = Breakdown::of_update(&looped).unwrap_or_default();
        assert_eq!(weight.parts.get("unknown").map(|p| p.count), Some(1));
    }
}
