//! The keyed side tables in memory (the memory store's, tests'): one ordered map of every
//! table's rows. Owns only those rows; the fence check of a fenced put is the memory store's
//! ([`crate::store::memory`]), which keeps the fencing tokens beside the rooms' logs.

use std::collections::BTreeMap;
use std::sync::Mutex;

use bytes::Bytes;

use super::Table;
use crate::ids::RoomName;

/// A row's name: table, room, key (`""` in a table keyed by the room alone).
type Row = (Table, String, String);

/// Every table's rows.
#[derive(Default)]
pub struct MemoryTables {
    rows: Mutex<BTreeMap<Row, Bytes>>,
}

/// A row's name (the key dropped in a table keyed by the room alone).
fn row(table: Table, room: &RoomName, key: &str) -> Row {
    let key = if table.keyed() { key } else { "" };
    (table, room.as_str().to_owned(), key.to_owned())
}

impl MemoryTables {
    fn with<R>(&self, f: impl FnOnce(&mut BTreeMap<Row, Bytes>) -> R) -> R {
        let mut guard = self.rows.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut guard)
    }

    /// One row's value.
    pub fn get(&self, table: Table, room: &RoomName, key: &str) -> Option<Bytes> {
        self.with(|rows| rows.get(&row(table, room, key)).cloned())
    }

    /// Every value of a room's rows in `table`.
    pub fn list(&self, table: Table, room: &RoomName) -> Vec<Bytes> {
        let from = row(table, room, "");
        self.with(|rows| {
            rows.range(from.clone()..)
                .take_while(|((t, r, _), _)| *t == from.0 && *r == from.1)
                .map(|(_, value)| value.clone())
                .collect()
        })
    }

    /// Replaces one row's value.
    pub fn put(&self, table: Table, room: &RoomName, key: &str, value: Bytes) {
        self.with(|rows| rows.insert(row(table, room, key), value));
    }

    /// Deletes one row (if present).
    pub fn delete(&self, table: Table, room: &RoomName, key: &str) {
        self.with(|rows| rows.remove(&row(table, room, key)));
    }
}
