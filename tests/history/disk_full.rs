//! A full disk under SQLite (docs/operations.md "What happens when the disk fills up"): the test
//! mounts a small tmpfs of its own (root only; it skips, saying why, where mounting is
//! refused), fills it, and writes on. No update is acknowledged or shown to another peer
//! unless durable; writers are answered `507 {"error":"store_full"}` or closed with `4507`;
//! readers keep reading; `/healthz` says `store: full`; when space returns writing resumes
//! without a restart, and after a restart every acknowledged write is there (no half-written
//! snapshot either: the room loads).

use crate::support;
use crate::support::server::TestServer;

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use fairyring::config::ServeConfig;
use serde_json::{Value, json};
use support::{Client, put_shape, shape_ids};

/// A tmpfs mounted for the test, unmounted when dropped.
struct TmpMount {
    dir: tempfile::TempDir,
}

impl TmpMount {
    /// Mounts a tmpfs of `size` (`8m`) on a fresh directory, or says why not and answers
    /// `None`.
    fn mount(size: &str) -> Option<TmpMount> {
        let dir = tempfile::tempdir().expect("tempdir");
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .status();
        match status {
            Ok(status) if status.success() => Some(TmpMount { dir }),
            other => {
                let required = std::env::var("FAIRYRING_REQUIRE_MOUNT").as_deref() == Ok("1");
                assert!(!required, "mounting a tmpfs was refused: {other:?}");
                eprintln!(
                    "skipping: mounting a tmpfs was refused ({other:?}); this test needs root"
                );
                None
            }
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for TmpMount {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// Writes a file until the filesystem is full; its path.
fn fill(dir: &Path) -> PathBuf {
    let path = dir.join("filler");
    let mut file = std::fs::File::create(&path).expect("filler");
    let chunk = vec![0xa5u8; 64 * 1024];
    loop {
        if file.write_all(&chunk).is_err() {
            break;
        }
    }
    // The last bytes: what a 64 KiB chunk left.
    let small = vec![0u8; 512];
    while file.write_all(&small).is_ok() {}
    let _ = file.sync_all();
    path
}

async fn create_shape(
    http: &str,
    room: &str,
    id: &str,
    text_bytes: usize,
) -> (u16, Value, Duration) {
    let started = Instant::now();
    let response = reqwest::Client::new()
        .patch(format!("{http}/rooms/{room}/shapes"))
        .timeout(Duration::from_secs(40))
        .json(&json!({"create": [{
            "id": id, "type": "rectangle", "x": 1, "y": 2, "w": 30, "h": 40,
            "text": "t".repeat(text_bytes)
        }]}))
        .send()
        .await
        .expect("an answer");
    let status = response.status().as_u16();
    let body = response.json().await.unwrap_or(Value::Null);
    (status, body, started.elapsed())
}

/// Writes 64 KiB shapes (at most 400) until one is refused with `507 store_full`, each answered
/// within 5 s; the acknowledged ids go into `acked`. How long the refusal took to come, or
/// `None` when the store never filled.
async fn write_until_full(
    http: &str,
    room: &str,
    acked: &mut BTreeSet<String>,
) -> Option<Duration> {
    for i in 0..400 {
        let id = format!("filling-{i}");
        let (status, body, took) = create_shape(http, room, &id, 64 * 1024).await;
        assert!(
            took < Duration::from_secs(5),
            "a write answered after {took:?}"
        );
        match status {
            200 => {
                acked.insert(id);
            }
            507 => {
                assert_eq!(body["error"], "store_full", "{body}");
                return Some(took);
            }
            other => panic!("{id}: {other} {body}"),
        }
    }
    None
}

/// Once space is freed: writes shape `after` until it is acknowledged (refused only with 507
/// meanwhile, for 30 s at most); how long that took.
async fn write_after_space_returns(http: &str, room: &str) -> Duration {
    let freed = Instant::now();
    loop {
        let (status, body, _) = create_shape(http, room, "after", 10).await;
        if status == 200 {
            return freed.elapsed();
        }
        assert_eq!(status, 507, "{body}");
        assert!(
            freed.elapsed() < Duration::from_secs(30),
            "writing never resumed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn health(http: &str) -> (u16, Value) {
    let response = reqwest::get(format!("{http}/healthz"))
        .await
        .expect("healthz");
    let status = response.status().as_u16();
    (status, response.json().await.expect("json"))
}

async fn stored_ids(http: &str, room: &str) -> BTreeSet<String> {
    let doc: Value = reqwest::get(format!("{http}/rooms/{room}/doc"))
        .await
        .expect("doc")
        .json()
        .await
        .expect("doc json");
    doc["doc"]["shapes"]
        .as_object()
        .map(|shapes| shapes.keys().cloned().collect())
        .unwrap_or_default()
}

fn config(db: &Path) -> ServeConfig {
    ServeConfig {
        store: format!("sqlite:{}", db.display()),
        // Compactions run while the disk fills: none may leave a half-written snapshot.
        compact_every: 8,
        ..ServeConfig::for_test()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_refuses_writes_keeps_readers_and_resumes_when_space_returns() {
    let Some(mount) = TmpMount::mount("24m") else {
        return;
    };
    let db = mount.path().join("fairyring.db");
    let server = TestServer::start(config(&db)).await.handle;
    let http = format!("http://{}", server.addr());
    let ws = format!("ws://{}", server.addr());
    let room = "full";
    let mut acked = BTreeSet::new();
    for i in 0..10 {
        let id = format!("before-{i}");
        let (status, body, _) = create_shape(&http, room, &id, 1000).await;
        assert_eq!(status, 200, "{body}");
        acked.insert(id);
    }
    let mut watcher = Client::connect(&ws, room).await;
    watcher
        .until("the room", |c| shape_ids(c).len() == acked.len())
        .await;

    // The disk fills up; writes go on until one meets it.
    let filler = fill(mount.path());
    let first_refusal = write_until_full(&http, room, &mut acked).await;
    let first_refusal = first_refusal.expect("the disk filled up");
    // The watcher never saw a write that was not kept: its socket closed (the room held the
    // unkept write and reloads) with the documented code.
    assert_eq!(watcher.until_closed().await, Some(4507));
    let seen: BTreeSet<String> = shape_ids(&watcher).into_iter().collect();
    assert!(
        seen.is_subset(&acked),
        "shown but not acknowledged: {:?}",
        seen.difference(&acked).collect::<Vec<_>>()
    );

    let (status, body) = health(&http).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["store"], "full", "{body}");
    assert_eq!(body["status"], "degraded", "{body}");

    // Readers keep reading: over HTTP, and over a socket that stays open while a writer of
    // the same room is refused.
    let ids = stored_ids(&http, room).await;
    assert!(acked.is_subset(&ids), "a read while the disk is full");
    let mut reader = Client::connect(&ws, room).await;
    reader
        .until("every acknowledged shape", |c| {
            acked.is_subset(&shape_ids(c).into_iter().collect())
        })
        .await;
    let mut writer = Client::connect(&ws, room).await;
    writer
        .until("the room", |c| {
            acked.is_subset(&shape_ids(c).into_iter().collect())
        })
        .await;
    writer.edit(|txn| put_shape(txn, "refused", 5.0)).await;
    assert_eq!(
        writer.until_closed().await,
        Some(4507),
        "the writer's close"
    );
    let (status, body, took) = create_shape(&http, room, "refused-rest", 10).await;
    assert_eq!((status, body["error"].as_str()), (507, Some("store_full")));
    assert!(took < Duration::from_secs(1), "refused at once: {took:?}");
    reader.drain(Duration::from_millis(300)).await;
    assert!(reader.closed.is_none(), "the reader's socket stays open");

    // Space returns: writing resumes without a restart.
    std::fs::remove_file(&filler).expect("free the disk");
    let recovery = write_after_space_returns(&http, room).await;
    acked.insert("after".into());
    reader
        .until("the write after space returned", |c| {
            shape_ids(c).iter().any(|id| id == "after")
        })
        .await;
    let (_, body) = health(&http).await;
    assert_eq!(body["store"], "ok", "{body}");
    eprintln!(
        "full disk: {} writes acknowledged, the first refusal answered in {first_refusal:?}, \
         writing resumed {recovery:?} after space returned",
        acked.len()
    );
    assert!(
        recovery < Duration::from_secs(5),
        "recovery took {recovery:?}"
    );
    server.shutdown().await;

    // After a restart every acknowledged write is there, and the room loads (no half-written
    // snapshot).
    let server = TestServer::start(config(&db)).await.handle;
    let http = format!("http://{}", server.addr());
    let ids = stored_ids(&http, room).await;
    let missing: Vec<&String> = acked.difference(&ids).collect();
    assert!(missing.is_empty(), "acknowledged but lost: {missing:?}");
    eprintln!("after the restart: {} acknowledged, 0 lost", acked.len());
    server.shutdown().await;
}

/// Issue 46: the PostgreSQL data directory fills up. The test's own cluster
/// (`support::pg_cluster`) keeps its data directory on a tmpfs the test mounted (its WAL
/// elsewhere: a full WAL is a PostgreSQL PANIC and restart, docs/operations.md), which the test
/// then fills. PostgreSQL's `53100 disk_full` takes the same path as SQLite's full disk: writers
/// are answered `507 store_full`, readers keep reading, writing resumes without a restart once
/// space returns, and every acknowledged write is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_postgres_data_directory_refuses_writes_and_resumes_when_space_returns() {
    use support::pg_cluster::PgCluster;
    let Some(mount) = TmpMount::mount("64m") else {
        return;
    };
    let data_in = mount.path().to_owned();
    let Some(cluster) =
        tokio::task::spawn_blocking(move || PgCluster::start_in(Some(data_in.as_path())))
            .await
            .expect("cluster")
    else {
        return;
    };
    let config = ServeConfig {
        store: cluster.url(),
        store_schema: Some("diskfull".into()),
        compact_every: 8,
        ..ServeConfig::for_test()
    };
    let server = TestServer::start(config.clone()).await.handle;
    let http = format!("http://{}", server.addr());
    let room = "pgfull";
    let mut acked = BTreeSet::new();
    for i in 0..5 {
        let id = format!("before-{i}");
        let (status, body, _) = create_shape(&http, room, &id, 1000).await;
        assert_eq!(status, 200, "{body}");
        acked.insert(id);
    }
    let filler = fill(mount.path());
    let first_refusal = write_until_full(&http, room, &mut acked).await;
    let first_refusal = first_refusal.unwrap_or_else(|| {
        panic!(
            "the data directory never filled up; PostgreSQL's log:\n{}",
            cluster.log()
        )
    });
    let (status, body) = health(&http).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["store"], "full", "{body}");
    let ids = stored_ids(&http, room).await;
    assert!(acked.is_subset(&ids), "a read while the disk is full");

    std::fs::remove_file(&filler).expect("free the disk");
    let recovery = write_after_space_returns(&http, room).await;
    acked.insert("after".into());
    eprintln!(
        "full PostgreSQL data directory: {} writes acknowledged, the first refusal answered in \
         {first_refusal:?}, writing resumed {recovery:?} after space returned",
        acked.len()
    );
    assert!(
        recovery < Duration::from_secs(5),
        "recovery took {recovery:?}"
    );
    server.shutdown().await;
    let server = TestServer::start(config).await.handle;
    let http = format!("http://{}", server.addr());
    let ids = stored_ids(&http, room).await;
    let missing: Vec<&String> = acked.difference(&ids).collect();
    assert!(missing.is_empty(), "acknowledged but lost: {missing:?}");
    server.shutdown().await;
    drop(cluster);
}

/// Issue 46: a fairy mid-request when the disk fills up. The mock model draws `a`, then stalls
/// in the middle of `b`, which the fairy shows tentatively (locked, and durable: the watcher
/// sees it). The disk fills and a REST write meets it: the room fails. The request stops at
/// once with a reason on its event stream; while the disk stays full a reader reloads the
/// room and keeps reading (the fairy's next host waits to write); once space returns the
/// half-drawn `b` is taken out of the durable document, `a` stays, the chat says the work was
/// interrupted, and the fairy's state loads — after a restart too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fairy_mid_request_on_a_full_disk_stops_and_leaves_nothing_half_drawn() {
    use support::fairy_http::{
        chat_texts, events, history, invite, locked_count, mock_config, prompt, read_events,
        shapes, stalling_in_b,
    };
    let Some(mount) = TmpMount::mount("24m") else {
        return;
    };
    let db = mount.path().join("fairyring.db");
    let mock = stalling_in_b().await;
    let config = ServeConfig {
        store: format!("sqlite:{}", db.display()),
        ..mock_config(&mock)
    };
    let server = fairyring::server::start(config.clone())
        .await
        .expect("server");
    let http = format!("http://{}", server.addr());
    let ws = format!("ws://{}", server.addr());
    let room = "fairyfull";
    let mut watcher = Client::connect(&ws, room).await;
    let id = invite(&http, room, "Pip").await;
    let mut stream = events(&http, room, &id).await;
    prompt(&http, room, &id, "two boxes").await;
    // `a` complete, `b` shown tentatively (locked): both durable, since the watcher sees them.
    watcher
        .until("a drawn and b half-drawn", |c| {
            let s = shapes(c);
            s["a"]["locked"] == json!(false) && s["b"]["locked"] == json!(true)
        })
        .await;

    // The disk fills up; a REST write meets it and the room fails under the fairy.
    let filler = fill(mount.path());
    let mut acked = BTreeSet::new();
    write_until_full(&http, room, &mut acked)
        .await
        .expect("the disk filled up");
    assert_eq!(watcher.until_closed().await, Some(4507));
    // The request stops at once, saying why (before: it went on drawing into the failed
    // room's document until the model's stream ended).
    let seen = read_events(&mut stream, "request-ended").await;
    assert!(seen.contains("storage is full"), "{seen}");

    // While the disk is full a reader reloads the room and keeps reading; the fairy's next
    // host waits for space (its clean-up is a write).
    let mut reader = Client::connect(&ws, room).await;
    reader
        .until("the room as stored", |c| shapes(c)["a"].is_object())
        .await;
    reader.drain(Duration::from_millis(600)).await;
    assert!(reader.closed.is_none(), "the reader's socket stays open");
    assert_eq!(shapes(&reader)["b"]["locked"], json!(true), "as stored");

    // Space returns: the half-drawn `b` goes from the durable document, `a` stays, and the
    // chat says the work was interrupted.
    std::fs::remove_file(&filler).expect("free the disk");
    let freed = Instant::now();
    reader
        .until("b taken back", |c| {
            let s = shapes(c);
            s["a"].is_object() && s.get("b").is_none() && locked_count(c) == 0
        })
        .await;
    let cleaned = freed.elapsed();
    reader
        .until("the chat to say so", |c| {
            chat_texts(c, &id).iter().any(|t| t.contains("interrupted"))
        })
        .await;
    assert!(reader.closed.is_none(), "{:?}", reader.closed);
    // Its state loads: the last one the store kept, idle again (what the request did after
    // that was never stored).
    let state = history(&http, room, &id).await;
    assert_eq!(state["mode"], "idling", "{state}");
    eprintln!(
        "a fairy on a full disk: its half-drawn shape taken back {cleaned:?} after space returned"
    );
    assert!(cleaned < Duration::from_secs(5), "took {cleaned:?}");
    server.shutdown().await;

    // After a restart: nothing half-drawn is stored, and the fairy's state loads.
    let server = fairyring::server::start(config).await.expect("restart");
    let http = format!("http://{}", server.addr());
    let ws = format!("ws://{}", server.addr());
    let mut after = Client::connect(&ws, room).await;
    after
        .until("the stored room", |c| shapes(c)["a"].is_object())
        .await;
    after.drain(Duration::from_millis(300)).await;
    assert!(shapes(&after).get("b").is_none() && locked_count(&after) == 0);
    assert!(
        chat_texts(&after, &id)
            .iter()
            .any(|t| t.contains("interrupted"))
    );
    assert_eq!(
        history(&http, room, &id).await,
        state,
        "the state as stored"
    );
    server.shutdown().await;
}

/// Issue 46: a prompt while the disk is full. It is answered `507 {"error":"store_full"}` at
/// once, before anything of it is written: no chat item, no request started (the model is
/// never called, then or once space returns), and a reader of the room keeps its socket. So
/// are a take-back of a request and a dismissal (the fairy stays).
/// Before, the prompt was accepted (`202`): its chat item entered the document, its commit met
/// the full disk and the room closed every socket with `4507` (readers included).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_on_a_full_disk_is_refused_and_starts_nothing() {
    use support::fairy_http::{
        actions, chat_texts, invite, mock_config, mock_server, post, rect, root_json, shapes,
    };
    let Some(mount) = TmpMount::mount("16m") else {
        return;
    };
    let db = mount.path().join("fairyring.db");
    let mock = mock_server(vec![actions(vec![rect("late", 0, 0, 50, 50)])]).await;
    let config = ServeConfig {
        store: format!("sqlite:{}", db.display()),
        ..mock_config(&mock)
    };
    let server = TestServer::start(config).await.handle;
    let http = format!("http://{}", server.addr());
    let ws = format!("ws://{}", server.addr());
    let room = "promptfull";
    let id = invite(&http, room, "Pip").await;
    let pal = invite(&http, room, "Pal").await;

    let filler = fill(mount.path());
    let mut acked = BTreeSet::new();
    write_until_full(&http, room, &mut acked)
        .await
        .expect("the disk filled up");
    let mut reader = Client::connect(&ws, room).await;
    reader
        .until("the room as stored", |c| {
            acked.is_subset(&shape_ids(c).into_iter().collect())
        })
        .await;

    let prompt_url = format!("{http}/rooms/{room}/fairies/{id}/prompt");
    let started = Instant::now();
    let (status, body) = post(
        &prompt_url,
        json!({"message": "draw late", "bounds": {"x": 0, "y": 0, "w": 800, "h": 600}}),
    )
    .await;
    let took = started.elapsed();
    assert_eq!(
        (status, body["error"].as_str()),
        (507, Some("store_full")),
        "{body}"
    );
    assert!(took < Duration::from_secs(1), "refused at once: {took:?}");
    reader.drain(Duration::from_millis(600)).await;
    assert!(
        reader.closed.is_none(),
        "the reader's socket stays open: {:?}",
        reader.closed
    );
    let told = |c: &Client| chat_texts(c, &id).iter().any(|t| t.contains("draw late"));
    assert!(!told(&reader), "nothing of the prompt is written");
    // A group prompt starts a project (records, tasks, chat items): refused the same way.
    let (status, body) = post(
        &format!("{http}/rooms/{room}/group-prompt"),
        json!({"message": "draw late together", "fairyIds": [id, pal],
               "bounds": {"x": 0, "y": 0, "w": 800, "h": 600}}),
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (507, Some("store_full")),
        "{body}"
    );
    reader.drain(Duration::from_millis(600)).await;
    assert!(
        root_json(&reader, "projects")
            .as_object()
            .is_none_or(|p| p.is_empty()),
        "no project was started"
    );
    // A take-back and a dismissal are writes too: refused the same way, the fairy left as it is.
    let (status, body) = post(
        &format!("{http}/rooms/{room}/fairies/{id}/requests/r-earlier/revert"),
        json!({}),
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (507, Some("store_full")),
        "{body}"
    );
    let dismissed = reqwest::Client::new()
        .delete(format!("{http}/rooms/{room}/fairies/{id}"))
        .send()
        .await
        .expect("an answer");
    assert_eq!(dismissed.status().as_u16(), 507);
    reader.drain(Duration::from_millis(600)).await;
    assert!(reader.closed.is_none(), "{:?}", reader.closed);
    assert!(
        root_json(&reader, "fairies").get(&id).is_some(),
        "the fairy stays"
    );

    // Space returns: the refused prompt left nothing to carry out.
    std::fs::remove_file(&filler).expect("free the disk");
    write_after_space_returns(&http, room).await;
    reader
        .until("the write after space returned", |c| {
            shape_ids(c).iter().any(|s| s == "after")
        })
        .await;
    reader.drain(Duration::from_millis(600)).await;
    assert!(!told(&reader));
    assert!(shapes(&reader).get("late").is_none(), "no request ran");
    assert_eq!(mock.requests().len(), 0, "the model was never called");
    // And a prompt now is taken.
    let (status, body) = post(
        &prompt_url,
        json!({"message": "draw late", "bounds": {"x": 0, "y": 0, "w": 800, "h": 600}}),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    reader
        .until("the prompt's shape", |c| shapes(c).get("late").is_some())
        .await;
    server.shutdown().await;
}
