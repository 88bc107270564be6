//! An in-memory [`Store`] (room logs, fairies' private state, projects, instructions): nothing survives the
//! process. For tests and `--store memory:`.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;
use bytes::Bytes;

use super::{Store, StoreError, StoredRoom};
use crate::ids::RoomName;

#[derive(Default)]
struct Log {
    snapshot: Option<Bytes>,
    updates: Vec<(u64, Bytes)>,
    last_seq: u64,
}

/// Keeps every room's log, and every fairy's private state, in maps.
#[derive(Default)]
pub struct MemoryStore {
    rooms: Mutex<HashMap<String, Log>>,
    fairy_states: Mutex<HashMap<(String, String), Bytes>>,
    instructions: Mutex<HashMap<String, String>>,
    projects: Mutex<HashMap<(String, String), Bytes>>,
}

impl MemoryStore {
    fn with<R>(&self, f: impl FnOnce(&mut HashMap<String, Log>) -> R) -> R {
        let mut guard = self.rooms.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut guard)
    }

    fn with_fairies<R>(&self, f: impl FnOnce(&mut HashMap<(String, String), Bytes>) -> R) -> R {
        let mut guard = self.fairy_states.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut guard)
    }
}

fn fairy_key(room: &RoomName, fairy: &str) -> (String, String) {
    (room.as_str().to_owned(), fairy.to_owned())
}

#[async_trait]
impl Store for MemoryStore {
    async fn load(&self, room: &RoomName) -> Result<StoredRoom, StoreError> {
        Ok(self.with(|rooms| match rooms.get(room.as_str()) {
            None => StoredRoom::default(),
            Some(log) => StoredRoom {
                snapshot: log.snapshot.clone(),
                updates: log.updates.iter().map(|(_, u)| u.clone()).collect(),
                last_seq: log.last_seq,
            },
        }))
    }

    async fn append(&self, room: &RoomName, updates: Vec<Bytes>) -> Result<u64, StoreError> {
        Ok(self.with(|rooms| {
            let log = rooms.entry(room.as_str().to_owned()).or_default();
            for update in updates {
                log.last_seq += 1;
                log.updates.push((log.last_seq, update));
            }
            log.last_seq
        }))
    }

    async fn compact(
        &self,
        room: &RoomName,
        snapshot: Bytes,
        upto_seq: u64,
    ) -> Result<(), StoreError> {
        self.with(|rooms| {
            let log = rooms.entry(room.as_str().to_owned()).or_default();
            log.snapshot = Some(snapshot);
            log.updates.retain(|(seq, _)| *seq > upto_seq);
        });
        Ok(())
    }

    async fn load_fairy_state(
        &self,
        room: &RoomName,
        fairy: &str,
    ) -> Result<Option<Bytes>, StoreError> {
        Ok(self.with_fairies(|states| states.get(&fairy_key(room, fairy)).cloned()))
    }

    async fn save_fairy_state(
        &self,
        room: &RoomName,
        fairy: &str,
        state: Bytes,
    ) -> Result<(), StoreError> {
        self.with_fairies(|states| states.insert(fairy_key(room, fairy), state));
        Ok(())
    }

    async fn load_projects(&self, room: &RoomName) -> Result<Vec<Bytes>, StoreError> {
        let projects = self.projects.lock().unwrap_or_else(|p| p.into_inner());
        Ok(projects
            .iter()
            .filter(|((r, _), _)| r == room.as_str())
            .map(|(_, record)| record.clone())
            .collect())
    }

    async fn save_project(
        &self,
        room: &RoomName,
        project: &str,
        record: Bytes,
    ) -> Result<(), StoreError> {
        let mut projects = self.projects.lock().unwrap_or_else(|p| p.into_inner());
        projects.insert(fairy_key(room, project), record);
        Ok(())
    }

    async fn delete_fairy_state(&self, room: &RoomName, fairy: &str) -> Result<(), StoreError> {
        self.with_fairies(|states| states.remove(&fairy_key(room, fairy)));
        Ok(())
    }

    async fn load_instructions(&self, room: &RoomName) -> Result<Option<String>, StoreError> {
        let guard = self.instructions.lock().unwrap_or_else(|p| p.into_inner());
        Ok(guard.get(room.as_str()).cloned())
    }

    async fn save_instructions(&self, room: &RoomName, text: &str) -> Result<(), StoreError> {
        let mut guard = self.instructions.lock().unwrap_or_else(|p| p.into_inner());
        if text.is_empty() {
            guard.remove(room.as_str());
        } else {
            guard.insert(room.as_str().to_owned(), text.to_owned());
        }
        Ok(())
    }
}
