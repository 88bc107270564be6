//! The keyed side tables kept beside the rooms' logs (docs/storage.md "Layout of the store"):
//! small records keyed by room (and, in most tables, a key within the room), replaced whole on
//! save, never part of a document nor broadcast.
//!
//! Owns the [`SideTables`] trait every store hands out ([`super::Store::side`]), the list of
//! tables ([`Table`]), the typed calls the rest of the server makes on them (fairies' private
//! state, projects, room instructions: the inherent methods of `dyn SideTables`), the SQL the
//! two SQL dialects share for them ([`sql`]) and the in-memory tables ([`memory`]). A backend
//! writes one generic implementation of four calls (get, list, put, delete), whatever the
//! number of tables. It must not touch the rooms' log (updates, snapshots, checkpoints) nor the
//! webhook outbox; the only log state it reads is a fairy's fencing token (docs/scaling.md
//! "Fencing"), for [`SideTables::put`] with a fence.

pub mod memory;
pub(crate) mod sql;

use async_trait::async_trait;
use bytes::Bytes;

use super::StoreError;
use crate::ids::RoomName;

/// One keyed side table. Its SQL name and columns are the same in every dialect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Table {
    /// `fairy_states (room, fairy, data)`: each fairy's private state (docs/storage.md "Fairy
    /// state"), written through the group-commit writer, the only table written under a fence.
    FairyStates,
    /// `fairy_requests (room, request, data)`: what each of a fairy's recent requests changed
    /// (its ledger, docs/storage.md "Fairy state"), a row per request keyed `FAIRY/NUMBER`,
    /// written beside its fairy's state (group commit, under the fairy's fence).
    FairyRequests,
    /// `projects (room, project, data)`: each room's projects with their tasks (docs/fairies.md
    /// "Projects").
    Projects,
    /// `room_instructions (room, text)`: a room's text for its fairies, keyed by the room alone
    /// (its key is always `""`), stored as text.
    Instructions,
}

impl Table {
    /// Every table.
    pub const ALL: [Table; 4] = [
        Table::FairyStates,
        Table::FairyRequests,
        Table::Projects,
        Table::Instructions,
    ];

    /// The table's SQL name.
    pub fn name(self) -> &'static str {
        match self {
            Table::FairyStates => "fairy_states",
            Table::FairyRequests => "fairy_requests",
            Table::Projects => "projects",
            Table::Instructions => "room_instructions",
        }
    }

    /// Whether rows are keyed by a key within the room (else by the room alone; the key is
    /// then ignored).
    pub fn keyed(self) -> bool {
        !matches!(self, Table::Instructions)
    }

    /// Whether values are kept as text (UTF-8) rather than bytes.
    pub fn text(self) -> bool {
        matches!(self, Table::Instructions)
    }

    /// Whether the SQL stores write it through the group-commit writer (a fairy's state changes
    /// every half second while it works), rather than with one statement on the pool (a project
    /// or an admin's instructions change a few times a minute at most).
    pub fn group_commit(self) -> bool {
        matches!(self, Table::FairyStates | Table::FairyRequests)
    }

    /// The fairy whose fencing token a fenced write of row `key` is checked against: the key
    /// itself in `fairy_states`, the part before its `/` in `fairy_requests` (fairy ids have
    /// no `/`).
    pub fn fenced_fairy(self, key: &str) -> &str {
        match self {
            Table::FairyRequests => key.split_once('/').map_or(key, |(fairy, _)| fairy),
            _ => key,
        }
    }
}

/// The key of a fairy's request row in [`Table::FairyRequests`]: `FAIRY/NUMBER`.
pub fn request_key(fairy: &str, number: u64) -> String {
    format!("{fairy}/{number}")
}

/// The keyed side tables of a store. Values are opaque bytes (a text table's are UTF-8); a row
/// is named by its table, its room and its key (`""` in a table keyed by the room alone).
#[async_trait]
pub trait SideTables: Send + Sync {
    /// The value of one row; `None` when there is none.
    async fn get(
        &self,
        table: Table,
        room: &RoomName,
        key: &str,
    ) -> Result<Option<Bytes>, StoreError>;

    /// Every value of a room's rows, in no particular order.
    async fn list(&self, table: Table, room: &RoomName) -> Result<Vec<Bytes>, StoreError>;

    /// Replaces one row's value, durably. With `fence` (the writer's fencing token of fairy
    /// `key`, docs/scaling.md "Fencing"): refused ([`StoreError::Fenced`], nothing written) when
    /// that fairy of the room has a newer token; a store that takes no fences ignores it.
    async fn put(
        &self,
        table: Table,
        room: &RoomName,
        key: &str,
        value: Bytes,
        fence: Option<u64>,
    ) -> Result<(), StoreError>;

    /// Deletes one row, durably; deleting a missing one is not an error.
    async fn delete(&self, table: Table, room: &RoomName, key: &str) -> Result<(), StoreError>;
}

/// A text table's value as stored (a non-UTF-8 one could only come from outside the server).
fn text(value: Bytes) -> Result<String, StoreError> {
    String::from_utf8(value.to_vec())
        .map_err(|e| StoreError::Database(sqlx::Error::Decode(e.into())))
}

/// The typed calls on the tables.
impl dyn SideTables + '_ {
    /// A fairy's private state (mode, model-facing history, todo list, tasks), as last saved
    /// with [`Self::save_fairy_state`]; `None` when there is none. The bytes are opaque to the
    /// store (the agent writes JSON).
    pub async fn load_fairy_state(
        &self,
        room: &RoomName,
        fairy: &str,
    ) -> Result<Option<Bytes>, StoreError> {
        self.get(Table::FairyStates, room, fairy).await
    }

    /// Replaces a fairy's private state, durably (it is never broadcast).
    pub async fn save_fairy_state(
        &self,
        room: &RoomName,
        fairy: &str,
        state: Bytes,
    ) -> Result<(), StoreError> {
        self.put(Table::FairyStates, room, fairy, state, None).await
    }

    /// [`Self::save_fairy_state`] by the host holding fencing token `fence` of the fairy:
    /// refused ([`StoreError::Fenced`], nothing written) when the fairy has a newer one, taken
    /// by the node that took it over. A store that takes no fences saves.
    pub async fn save_fairy_state_fenced(
        &self,
        room: &RoomName,
        fairy: &str,
        state: Bytes,
        fence: u64,
    ) -> Result<(), StoreError> {
        self.put(Table::FairyStates, room, fairy, state, Some(fence))
            .await
    }

    /// Deletes a fairy's private state, durably; deleting a missing one is not an error.
    pub async fn delete_fairy_state(&self, room: &RoomName, fairy: &str) -> Result<(), StoreError> {
        self.delete(Table::FairyStates, room, fairy).await
    }

    /// One record of a fairy's ledger, number `number` ([`request_key`]), as last saved with
    /// [`Self::save_fairy_request`]; `None` when there is none. Opaque bytes (the agent's JSON).
    pub async fn load_fairy_request(
        &self,
        room: &RoomName,
        fairy: &str,
        number: u64,
    ) -> Result<Option<Bytes>, StoreError> {
        self.get(Table::FairyRequests, room, &request_key(fairy, number))
            .await
    }

    /// Replaces one record of a fairy's ledger, durably; with `fence`, refused like
    /// [`Self::save_fairy_state_fenced`] once the fairy has a newer token.
    pub async fn save_fairy_request(
        &self,
        room: &RoomName,
        fairy: &str,
        number: u64,
        record: Bytes,
        fence: Option<u64>,
    ) -> Result<(), StoreError> {
        let key = request_key(fairy, number);
        self.put(Table::FairyRequests, room, &key, record, fence)
            .await
    }

    /// Deletes one record of a fairy's ledger, durably; a missing one is not an error.
    pub async fn delete_fairy_request(
        &self,
        room: &RoomName,
        fairy: &str,
        number: u64,
    ) -> Result<(), StoreError> {
        self.delete(Table::FairyRequests, room, &request_key(fairy, number))
            .await
    }

    /// The room's projects (docs/fairies.md "Projects"): every record saved with
    /// [`Self::save_project`], in no particular order. The bytes are opaque to the store (the
    /// agent writes a project with its tasks as JSON); never part of the document.
    pub async fn load_projects(&self, room: &RoomName) -> Result<Vec<Bytes>, StoreError> {
        self.list(Table::Projects, room).await
    }

    /// Replaces one project's record (keyed by room and project id), durably.
    pub async fn save_project(
        &self,
        room: &RoomName,
        project: &str,
        record: Bytes,
    ) -> Result<(), StoreError> {
        self.put(Table::Projects, room, project, record, None).await
    }

    /// The room's instructions for its fairies (plain text an admin set with
    /// `PUT /rooms/{room}/instructions`); `None` when none are set.
    pub async fn load_instructions(&self, room: &RoomName) -> Result<Option<String>, StoreError> {
        self.get(Table::Instructions, room, "")
            .await?
            .map(text)
            .transpose()
    }

    /// Replaces the room's instructions, durably; an empty text removes them.
    pub async fn save_instructions(&self, room: &RoomName, text: &str) -> Result<(), StoreError> {
        if text.is_empty() {
            self.delete(Table::Instructions, room, "").await
        } else {
            let value = Bytes::copy_from_slice(text.as_bytes());
            self.put(Table::Instructions, room, "", value, None).await
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Fairies' private state: keyed by (room, fairy), replaced on save, gone on delete.
    pub(crate) async fn fairy_state_contract(
        side: &dyn SideTables,
        room: &RoomName,
        other: &RoomName,
    ) {
        assert_eq!(side.load_fairy_state(room, "f-1").await.unwrap(), None);
        side.save_fairy_state(room, "f-1", Bytes::from_static(b"{\"mode\":\"idling\"}"))
            .await
            .unwrap();
        side.save_fairy_state(room, "f-1", Bytes::from_static(b"{\"mode\":\"soloing\"}"))
            .await
            .unwrap();
        side.save_fairy_state(other, "f-1", Bytes::from_static(b"other"))
            .await
            .unwrap();
        side.save_fairy_state(room, "f-2", Bytes::from_static(b"two"))
            .await
            .unwrap();
        let stored = |room, fairy| side.load_fairy_state(room, fairy);
        assert_eq!(
            stored(room, "f-1").await.unwrap().as_deref(),
            Some(&b"{\"mode\":\"soloing\"}"[..])
        );
        assert_eq!(
            stored(other, "f-1").await.unwrap().as_deref(),
            Some(&b"other"[..])
        );
        side.delete_fairy_state(room, "f-1").await.unwrap();
        side.delete_fairy_state(room, "f-1").await.unwrap();
        assert_eq!(stored(room, "f-1").await.unwrap(), None);
        assert_eq!(
            stored(room, "f-2").await.unwrap().as_deref(),
            Some(&b"two"[..])
        );
        assert_eq!(
            stored(other, "f-1").await.unwrap().as_deref(),
            Some(&b"other"[..])
        );
    }

    /// Fairies' request records: keyed by (room, fairy, number), apart from each other,
    /// replaced on save, gone on delete.
    pub(crate) async fn fairy_requests_contract(side: &dyn SideTables, room: &RoomName) {
        assert_eq!(side.load_fairy_request(room, "f-1", 0).await.unwrap(), None);
        for (fairy, number, data) in [("f-1", 0, "a"), ("f-1", 1, "b"), ("f-2", 0, "c")] {
            let data = Bytes::from(data.as_bytes().to_vec());
            side.save_fairy_request(room, fairy, number, data, None)
                .await
                .unwrap();
        }
        side.save_fairy_request(room, "f-1", 1, Bytes::from_static(b"b2"), None)
            .await
            .unwrap();
        let stored = |fairy, number| side.load_fairy_request(room, fairy, number);
        assert_eq!(stored("f-1", 0).await.unwrap().as_deref(), Some(&b"a"[..]));
        assert_eq!(stored("f-1", 1).await.unwrap().as_deref(), Some(&b"b2"[..]));
        assert_eq!(stored("f-2", 0).await.unwrap().as_deref(), Some(&b"c"[..]));
        side.delete_fairy_request(room, "f-1", 0).await.unwrap();
        side.delete_fairy_request(room, "f-1", 0).await.unwrap();
        assert_eq!(stored("f-1", 0).await.unwrap(), None);
        assert_eq!(stored("f-1", 1).await.unwrap().as_deref(), Some(&b"b2"[..]));
        assert_eq!(stored("f-2", 0).await.unwrap().as_deref(), Some(&b"c"[..]));
        assert_eq!(Table::FairyRequests.fenced_fairy("f-1/12"), "f-1");
        assert_eq!(Table::FairyStates.fenced_fairy("f-1"), "f-1");
    }

    /// Projects: per room and project, replaced on save, listed per room.
    pub(crate) async fn projects_contract(
        side: &dyn SideTables,
        room: &RoomName,
        other: &RoomName,
    ) {
        assert!(side.load_projects(room).await.unwrap().is_empty());
        for (project, data) in [("p-1", "one"), ("p-2", "two"), ("p-1", "one again")] {
            side.save_project(room, project, Bytes::from(data.as_bytes().to_vec()))
                .await
                .unwrap();
        }
        side.save_project(other, "p-1", Bytes::from_static(b"other"))
            .await
            .unwrap();
        let mut saved = side.load_projects(room).await.unwrap();
        saved.sort();
        assert_eq!(
            saved,
            vec![Bytes::from_static(b"one again"), Bytes::from_static(b"two")]
        );
        assert_eq!(
            side.load_projects(other).await.unwrap(),
            vec![Bytes::from_static(b"other")]
        );
    }

    /// Room instructions: per room, replaced on save, removed by an empty text.
    pub(crate) async fn instructions_contract(
        side: &dyn SideTables,
        room: &RoomName,
        other: &RoomName,
    ) {
        assert_eq!(side.load_instructions(room).await.unwrap(), None);
        side.save_instructions(room, "Use blue.").await.unwrap();
        side.save_instructions(room, "Use red, é ✓.").await.unwrap();
        side.save_instructions(other, "Other.").await.unwrap();
        assert_eq!(
            side.load_instructions(room).await.unwrap().as_deref(),
            Some("Use red, é ✓.")
        );
        side.save_instructions(other, "").await.unwrap();
        assert_eq!(side.load_instructions(other).await.unwrap(), None);
        assert_eq!(
            side.load_instructions(room).await.unwrap().as_deref(),
            Some("Use red, é ✓.")
        );
    }

    /// The tables are apart: a key of one table is not a row of another.
    pub(crate) async fn tables_are_apart(side: &dyn SideTables) {
        let room = RoomName::parse("apart").unwrap();
        side.put(Table::Projects, &room, "k", Bytes::from_static(b"p"), None)
            .await
            .unwrap();
        assert_eq!(
            side.get(Table::FairyStates, &room, "k").await.unwrap(),
            None
        );
        assert!(
            side.list(Table::FairyStates, &room)
                .await
                .unwrap()
                .is_empty()
        );
        side.delete(Table::FairyStates, &room, "k").await.unwrap();
        assert_eq!(
            side.get(Table::Projects, &room, "k")
                .await
                .unwrap()
                .as_deref(),
            Some(&b"p"[..])
        );
    }
}
