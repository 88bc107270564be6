//! The projects of a room and their tasks: the truth (docs/fairies.md "Projects"). Each room's
//! [`RoomProjects`] keeps them in memory, saves them to the store (one record per project: the
//! project with its tasks) and mirrors every change into the document's `projects` and `tasks`
//! roots for browsers ([`super::doc`]). Nothing here is ever read back from the document: peers
//! may not write those roots, but a room stored by an older version may hold records anyone
//! wrote, and the document is a view, not the state.
//!
//! Owns the records, their stored form, the per-room books ([`ProjectBooks`], loaded once per
//! room and completed from the store when a fairy is hosted, forgotten once the room unloaded
//! and nobody holds its book) and the background writer of
//! records (the runtime's calls are synchronous; the latest record of each project is written,
//! in the order handed over, and [`ProjectBooks::flush`] waits for them). A project's creation
//! is stored before anything shows it ([`RoomProjects::create`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tokio::sync::{Notify, OnceCell, watch};
use yrs::Doc;

use super::doc::{self, PROJECT_COLORS, Project, ProjectTask};
use crate::agent::work::{ProjectStatus, TaskStatus};
use crate::ids::FairyId;
use crate::ids::ProjectId;
use crate::ids::RoomName;
use crate::origin::TxnOrigin;
use crate::store::{Store, StoreError};

/// The stored form of one project.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Record {
    id: ProjectId,
    project: Project,
    tasks: Vec<ProjectTask>,
}

/// One project and its tasks, by task id.
#[derive(Debug, Clone)]
struct Entry {
    project: Project,
    tasks: BTreeMap<String, ProjectTask>,
}

impl Entry {
    fn record(&self, id: &ProjectId) -> Option<Bytes> {
        let record = Record {
            id: id.clone(),
            project: self.project.clone(),
            tasks: self.tasks.values().cloned().collect(),
        };
        match serde_json::to_vec(&record) {
            Ok(bytes) => Some(Bytes::from(bytes)),
            Err(error) => {
                tracing::error!(project = %id, %error, "project not encoded");
                None
            }
        }
    }
}

impl From<Record> for Entry {
    fn from(record: Record) -> Self {
        let mut project = record.project;
        project.id = Some(record.id);
        Entry {
            project,
            tasks: record
                .tasks
                .into_iter()
                .map(|t| (t.id.clone(), t))
                .collect(),
        }
    }
}

/// Why a project could not be created.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    /// A fairy named is in a live project already.
    #[error("fairy '{0}' is already in a live project")]
    Busy(FairyId),
    /// The store did not take it.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The projects of one room (see the module docs).
pub struct RoomProjects {
    room: RoomName,
    entries: Mutex<BTreeMap<ProjectId, Entry>>,
    writer: Arc<Writer>,
    store: Arc<dyn Store>,
    /// Where a project's end is reported (`project.ended`), if anywhere.
    webhooks: Option<crate::webhooks::Webhooks>,
}

impl RoomProjects {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<ProjectId, Entry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The project `id`.
    pub fn project(&self, id: &ProjectId) -> Option<Project> {
        self.lock().get(id).map(|e| e.project.clone())
    }

    /// The live project `fairy` is a member of, if any.
    pub fn live_project_of(&self, fairy: &FairyId) -> Option<Project> {
        live_of(&self.lock(), fairy)
    }

    /// The task `task_id` of `project`.
    pub fn task(&self, project: &ProjectId, task_id: &str) -> Option<ProjectTask> {
        self.lock()
            .get(project)
            .and_then(|e| e.tasks.get(task_id).cloned())
    }

    /// Every task of `project`, ordered by id.
    pub fn tasks(&self, project: &ProjectId) -> Vec<ProjectTask> {
        self.lock()
            .get(project)
            .map(|e| e.tasks.values().cloned().collect())
            .unwrap_or_default()
    }

    /// Creates a project whose members are `project.members`, unless one of them is in a live
    /// project already (checked and created under one lock: two group prompts cannot both
    /// take a fairy). Its colour is one no live project uses. Stored before the document shows
    /// it, so that no reader of the store ever misses a project the document shows.
    pub async fn create(
        &self,
        doc: &Doc,
        id: &ProjectId,
        mut project: Project,
    ) -> Result<Project, CreateError> {
        project.id = Some(id.clone());
        let record = {
            let mut entries = self.lock();
            if let Some(busy) = project
                .members
                .iter()
                .find(|m| live_of(&entries, &m.id).is_some())
            {
                return Err(CreateError::Busy(busy.id.clone()));
            }
            project.color = free_color(&entries);
            let entry = Entry {
                project: project.clone(),
                tasks: BTreeMap::new(),
            };
            let record = entry.record(id);
            entries.insert(id.clone(), entry);
            record
        };
        if let Some(record) = record
            && let Err(error) = self
                .store
                .side()
                .save_project(&self.room, id.as_str(), record)
                .await
        {
            self.lock().remove(id);
            return Err(error.into());
        }
        let _entries = self.lock();
        doc::write_project(doc, TxnOrigin::System, id, &project);
        Ok(project)
    }

    /// Replaces the record of project `id` (which must exist), stores it and mirrors it.
    pub fn put_project(&self, doc: &Doc, origin: TxnOrigin, id: &ProjectId, project: &Project) {
        let mut entries = self.lock();
        let Some(entry) = entries.get_mut(id) else {
            tracing::warn!(project = %id, "unknown project not written");
            return;
        };
        self.report_end(id, entry.project.status, project.status);
        entry.project = project.clone();
        entry.project.id = Some(id.clone());
        self.writer.hand_over(&self.room, id, entry.record(id));
        // Under the lock: the document shows the changes in the order they were made.
        doc::write_project(doc, origin, id, project);
    }

    /// Creates or replaces a task of an existing project, stores and mirrors it.
    pub fn put_task(&self, doc: &Doc, origin: TxnOrigin, task: &ProjectTask) {
        let mut entries = self.lock();
        let Some(entry) = entries.get_mut(&task.project_id) else {
            tracing::warn!(project = %task.project_id, "task of an unknown project not written");
            return;
        };
        entry.tasks.insert(task.id.clone(), task.clone());
        self.writer
            .hand_over(&self.room, &task.project_id, entry.record(&task.project_id));
        doc::write_task(doc, origin, task);
    }

    /// Scaled out, on a node that does not coordinate the task's project: records `task` in
    /// memory only, so that this node's members see their own change at once. The project's
    /// coordinator (its leader's host) stores and mirrors it when told; the next refresh
    /// from the store replaces this copy.
    pub fn note_task(&self, task: &ProjectTask) {
        if let Some(entry) = self.lock().get_mut(&task.project_id) {
            entry.tasks.insert(task.id.clone(), task.clone());
        }
    }

    /// Marks project `id` `aborted` and hands its unfinished tasks back (`todo`, unassigned):
    /// nobody works on them any more, and the document says so to every browser.
    pub fn abort(&self, doc: &Doc, origin: TxnOrigin, id: &ProjectId, project: &mut Project) {
        project.status = ProjectStatus::Aborted;
        let mut entries = self.lock();
        let Some(entry) = entries.get_mut(id) else {
            return;
        };
        self.report_end(id, entry.project.status, project.status);
        entry.project = project.clone();
        entry.project.id = Some(id.clone());
        let mut handed_back = Vec::new();
        for task in entry.tasks.values_mut() {
            if task.status == TaskStatus::InProgress {
                task.status = TaskStatus::Todo;
                task.assigned_to = None;
                handed_back.push(task.clone());
            }
        }
        self.writer.hand_over(&self.room, id, entry.record(id));
        doc::write_project(doc, origin.clone(), id, project);
        for task in &handed_back {
            doc::write_task(doc, origin.clone(), task);
        }
    }

    /// Reports `project.ended` when a live project's status becomes an end.
    fn report_end(&self, id: &ProjectId, was: ProjectStatus, now: ProjectStatus) {
        if let Some(webhooks) = &self.webhooks
            && was.is_live()
            && !now.is_live()
        {
            let status = match now {
                ProjectStatus::Done => "done",
                ProjectStatus::Aborted => "aborted",
                ProjectStatus::Planning | ProjectStatus::Active => return,
            };
            webhooks.project_ended(&self.room, id.as_str(), status);
        }
    }

    /// Scaled out: replaces every project it holds with the store's record (and adds the ones
    /// it lacks), except those `keep` names: the projects this node coordinates, whose record
    /// here is the newest. Another node coordinates the rest and stored its changes before
    /// telling this node anything.
    pub async fn refresh_from_store(
        &self,
        keep: impl Fn(&Project) -> bool,
    ) -> Result<(), StoreError> {
        let stored = stored_records(self.store.as_ref(), &self.room).await?;
        let mut entries = self.lock();
        for record in stored {
            if entries.get(&record.id).is_some_and(|e| keep(&e.project)) {
                continue;
            }
            entries.insert(record.id.clone(), Entry::from(record));
        }
        Ok(())
    }

    /// Adds the stored projects it does not hold yet (another node's, or one created since
    /// the room was loaded here); what it holds stays (it may be newer than the store).
    async fn complete_from_store(&self) -> Result<(), StoreError> {
        let stored = stored_records(self.store.as_ref(), &self.room).await?;
        let mut entries = self.lock();
        for record in stored {
            entries
                .entry(record.id.clone())
                .or_insert_with(|| Entry::from(record));
        }
        Ok(())
    }
}

/// Ends (`aborted`), in the document, every live project the store does not know: records an
/// older version let anyone write, which no fairy works on (a one-time migration of rooms
/// stored before projects were kept in the store; a no-op afterwards, and for a room without
/// live projects no store read). Run when a room loads, before any peer sees it.
pub async fn end_unknown_projects(
    store: &dyn Store,
    room: &RoomName,
    doc: &Doc,
) -> Result<(), StoreError> {
    let live = doc::live_projects_in(doc);
    if live.is_empty() {
        return Ok(());
    }
    let known: Vec<ProjectId> = stored_records(store, room)
        .await?
        .into_iter()
        .map(|record| record.id)
        .collect();
    for mut stale in live {
        let Some(id) = stale.id.clone() else {
            continue;
        };
        if known.contains(&id) {
            continue;
        }
        tracing::warn!(%room, project = %id, "live project unknown to the store ended in the document");
        stale.status = ProjectStatus::Aborted;
        doc::write_project(doc, TxnOrigin::System, &id, &stale);
    }
    Ok(())
}

/// The readable records the store holds for `room` (an unreadable one is logged and skipped).
async fn stored_records(store: &dyn Store, room: &RoomName) -> Result<Vec<Record>, StoreError> {
    Ok(store
        .side()
        .load_projects(room)
        .await?
        .iter()
        .filter_map(|bytes| match serde_json::from_slice(bytes) {
            Ok(record) => Some(record),
            Err(error) => {
                tracing::warn!(%room, %error, "stored project unreadable; skipped");
                None
            }
        })
        .collect())
}

fn live_of(entries: &BTreeMap<ProjectId, Entry>, fairy: &FairyId) -> Option<Project> {
    entries
        .values()
        .find(|e| e.project.status.is_live() && e.project.role_of(fairy).is_some())
        .map(|e| e.project.clone())
}

/// A colour no live project uses (the first of [`PROJECT_COLORS`] when all are taken).
fn free_color(entries: &BTreeMap<ProjectId, Entry>) -> String {
    let used: Vec<&str> = entries
        .values()
        .filter(|e| e.project.status.is_live())
        .map(|e| e.project.color.as_str())
        .collect();
    PROJECT_COLORS
        .iter()
        .find(|c| !used.contains(c))
        .or(PROJECT_COLORS.first())
        .map(|c| (*c).to_owned())
        .unwrap_or_default()
}

/// The books of every room with fairies on this node, and their writer.
pub struct ProjectBooks {
    store: Arc<dyn Store>,
    /// Where the rooms' projects report their end, if anywhere.
    webhooks: Option<crate::webhooks::Webhooks>,
    books: Mutex<HashMap<RoomName, Arc<OnceCell<Arc<RoomProjects>>>>>,
    writer: Arc<Writer>,
    /// The writer's task is spawned by the first [`ProjectBooks::of`] (on a Tokio runtime).
    writing: std::sync::Once,
}

impl ProjectBooks {
    /// Books over `store`.
    pub fn new(store: Arc<dyn Store>) -> Self {
        ProjectBooks {
            store,
            webhooks: None,
            books: Mutex::new(HashMap::new()),
            writer: Arc::new(Writer::default()),
            writing: std::sync::Once::new(),
        }
    }

    /// Books that report each project's end to `webhooks` (`project.ended`).
    pub fn with_webhooks(mut self, webhooks: Option<crate::webhooks::Webhooks>) -> Self {
        self.webhooks = webhooks;
        self
    }

    /// The book of `room`, loaded from the store the first time.
    pub async fn of(&self, room: &RoomName) -> Result<Arc<RoomProjects>, StoreError> {
        self.book(room, false).await
    }

    /// [`ProjectBooks::of`] for a fairy being hosted: also completed from the store when it was
    /// loaded before (a fairy taken over from another node finds the project it was in).
    pub async fn for_hosting(&self, room: &RoomName) -> Result<Arc<RoomProjects>, StoreError> {
        self.book(room, true).await
    }

    async fn book(&self, room: &RoomName, complete: bool) -> Result<Arc<RoomProjects>, StoreError> {
        self.writing.call_once(|| {
            tokio::spawn(write_loop(self.writer.clone(), self.store.clone()));
        });
        let cell = {
            let mut books = self.books.lock().unwrap_or_else(|p| p.into_inner());
            books.entry(room.clone()).or_default().clone()
        };
        let mut first = false;
        let book = cell
            .get_or_try_init(|| async {
                first = true;
                // A book forgotten before (its room unloaded) may have records not written yet:
                // the store holds them before the book is read from it again.
                self.writer.caught_up().await;
                let book = Arc::new(RoomProjects {
                    room: room.clone(),
                    entries: Mutex::new(BTreeMap::new()),
                    writer: self.writer.clone(),
                    store: self.store.clone(),
                    webhooks: self.webhooks.clone(),
                });
                book.complete_from_store().await?;
                Ok::<_, StoreError>(book)
            })
            .await?
            .clone();
        if complete && !first {
            book.complete_from_store().await?;
        }
        Ok(book)
    }

    /// The book of `room` if it was loaded already (without waiting).
    pub fn loaded(&self, room: &RoomName) -> Option<Arc<RoomProjects>> {
        let books = self.books.lock().unwrap_or_else(|p| p.into_inner());
        books.get(room).and_then(|cell| cell.get().cloned())
    }

    /// Forgets the book of `room` when nobody holds it any more (its room unloaded, the
    /// runtimes of its fairies gone), so that the books of rooms that come and go do not stay
    /// for good; its next use reads it from the store again. A book someone holds stays.
    pub fn forget(&self, room: &RoomName) {
        let mut books = self.books.lock().unwrap_or_else(|p| p.into_inner());
        let Some(cell) = books.get(room) else {
            return;
        };
        // Clones of a cell are made under this lock only, and of a book only through its cell
        // or under this lock: the map's are the only ones left when the counts say so.
        let unused = Arc::strong_count(cell) == 1
            && cell.get().is_none_or(|book| Arc::strong_count(book) == 1);
        if unused {
            books.remove(room);
        }
    }

    /// How many rooms' books are held.
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        self.books.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Resolves once every record handed over so far is written (or given up after an error).
    pub async fn flush(&self) {
        self.writer.caught_up().await;
    }
}

impl Drop for ProjectBooks {
    fn drop(&mut self) {
        // The writer writes what is pending and ends on its own.
        self.writer.lock().closed = true;
        self.writer.wake.notify_one();
    }
}

/// The background writer of project records: the latest record per project, written in the
/// order first handed over.
#[derive(Default)]
struct Writer {
    slot: Mutex<Pending>,
    wake: Notify,
    done: watch::Sender<u64>,
}

#[derive(Default)]
struct Pending {
    /// Records not written yet, by room and project, the newest replacing an older one.
    next: Vec<((RoomName, ProjectId), Bytes)>,
    /// Version of the latest record handed over.
    requested: u64,
    /// The books are gone: the task ends once `next` is written.
    closed: bool,
}

impl Writer {
    fn lock(&self) -> MutexGuard<'_, Pending> {
        self.slot.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn hand_over(&self, room: &RoomName, id: &ProjectId, record: Option<Bytes>) {
        let Some(record) = record else {
            return;
        };
        {
            let mut pending = self.lock();
            pending.requested += 1;
            let key = (room.clone(), id.clone());
            match pending.next.iter_mut().find(|(k, _)| *k == key) {
                Some((_, slot)) => *slot = record,
                None => pending.next.push((key, record)),
            }
        }
        self.wake.notify_one();
    }

    async fn caught_up(&self) {
        let wanted = self.lock().requested;
        let mut done = self.done.subscribe();
        let _ = done.wait_for(|v| *v >= wanted).await;
    }
}

async fn write_loop(writer: Arc<Writer>, store: Arc<dyn Store>) {
    loop {
        let (next, version, closed) = {
            let mut pending = writer.lock();
            (
                std::mem::take(&mut pending.next),
                pending.requested,
                pending.closed,
            )
        };
        if next.is_empty() {
            if closed {
                return;
            }
            writer.wake.notified().await;
            continue;
        }
        for ((room, id), record) in next {
            if let Err(error) = store.side().save_project(&room, id.as_str(), record).await {
                // The project's next change writes it whole; nothing is half-stored.
                tracing::error!(%room, project = %id, %error, "project not stored");
            }
        }
        writer.done.send_replace(version);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::projects::doc::Member;
    use crate::agent::work::Role;
    use crate::store::memory::MemoryStore;

    fn fairy(id: &str) -> FairyId {
        FairyId::parse(id).unwrap_or_else(|e| panic!("{e}"))
    }

    fn project(members: &[&str]) -> Project {
        Project {
            id: None,
            title: "a house".into(),
            description: String::new(),
            plan: String::new(),
            orchestrator_id: fairy(members[0]),
            members: members
                .iter()
                .enumerate()
                .map(|(i, m)| Member {
                    id: fairy(m),
                    role: if i == 0 {
                        Role::Orchestrator
                    } else {
                        Role::Drone
                    },
                })
                .collect(),
            color: String::new(),
            status: ProjectStatus::Planning,
            apply: Default::default(),
        }
    }

    fn task(project: &ProjectId, id: &str, status: TaskStatus) -> ProjectTask {
        ProjectTask {
            id: id.into(),
            project_id: project.clone(),
            title: "walls".into(),
            text: "draw walls".into(),
            assigned_to: Some(fairy("d")),
            status,
            x: 1.0,
            y: 2.0,
            w: 3.0,
            h: 4.0,
            page_id: "page:main".into(),
        }
    }

    #[tokio::test]
    async fn projects_live_in_the_store_and_the_document_only_mirrors_them() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
        let room = RoomName::parse("book").unwrap_or_else(|e| panic!("{e}"));
        let doc = Doc::new();
        let books = ProjectBooks::new(store.clone());
        let book = books.of(&room).await.unwrap_or_else(|e| panic!("{e}"));
        let id = ProjectId::random();
        let created = book
            .create(&doc, &id, project(&["o", "d"]))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(created.color, PROJECT_COLORS[0]);
        assert!(matches!(
            book.create(&doc, &ProjectId::random(), project(&["x", "d"])).await,
            Err(CreateError::Busy(f)) if f == fairy("d")
        ));
        book.put_task(
            &doc,
            TxnOrigin::System,
            &task(&id, "t1", TaskStatus::InProgress),
        );
        book.put_task(&doc, TxnOrigin::System, &task(&id, "t0", TaskStatus::Done));
        assert_eq!(doc::live_projects_in(&doc).len(), 1, "mirrored");

        // A writer's change of the document changes nothing the server reads.
        doc::write_task(&doc, TxnOrigin::System, &{
            let mut forged = task(&id, "t1", TaskStatus::Done);
            forged.x = 20_000.0;
            forged
        });
        let t1 = book.task(&id, "t1").unwrap_or_else(|| panic!("t1"));
        assert_eq!((t1.x, t1.status), (1.0, TaskStatus::InProgress));

        let mut p = book.project(&id).unwrap_or_else(|| panic!("project"));
        book.abort(&doc, TxnOrigin::System, &id, &mut p);
        books.flush().await;

        // Another node (or a restart) reads the same from the store.
        let again = ProjectBooks::new(store.clone());
        let other = again.of(&room).await.unwrap_or_else(|e| panic!("{e}"));
        let back = other.project(&id).unwrap_or_else(|| panic!("stored"));
        assert_eq!(back.status, ProjectStatus::Aborted);
        let ids: Vec<String> = other.tasks(&id).into_iter().map(|t| t.id).collect();
        assert_eq!(ids, ["t0", "t1"]);
        assert_eq!(
            other.task(&id, "t1").map(|t| (t.status, t.assigned_to)),
            Some((TaskStatus::Todo, None))
        );
        assert!(other.live_project_of(&fairy("d")).is_none());
    }

    #[tokio::test]
    async fn a_live_project_only_the_document_holds_is_ended_there_and_never_read() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
        let room = RoomName::parse("legacy").unwrap_or_else(|e| panic!("{e}"));
        let doc = Doc::new();
        let books = ProjectBooks::new(store.clone());
        let book = books.of(&room).await.unwrap_or_else(|e| panic!("{e}"));
        let real = ProjectId::random();
        book.create(&doc, &real, project(&["o", "d"]))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let forged = ProjectId::random();
        let mut p = project(&["x", "y"]);
        p.status = ProjectStatus::Active;
        doc::write_project(&doc, TxnOrigin::System, &forged, &p);
        end_unknown_projects(store.as_ref(), &room, &doc)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let live: Vec<Option<ProjectId>> = doc::live_projects_in(&doc)
            .into_iter()
            .map(|p| p.id)
            .collect();
        assert_eq!(live, vec![Some(real)], "only the forged one ended");
        assert!(book.project(&forged).is_none());
        assert!(book.live_project_of(&fairy("y")).is_none());
    }
}
