//! Kill -9 durability: whatever any peer has received must survive the process being killed
//! mid-stream (every update is durable in SQLite before it is broadcast).

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use support::{Client, put_shape};
use yrs::{Map, Transact};

struct Server {
    child: Child,
    base: String,
}

fn spawn_server(db: &std::path::Path) -> Server {
    let mut child = Command::new(env!("CARGO_BIN_EXE_fairyring"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--insecure-no-auth",
            "--store",
        ])
        .arg(format!("sqlite:{}", db.display()))
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn fairyring");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("first line");
    let addr = line
        .trim()
        .strip_prefix("listening on http://")
        .expect("listening line")
        .to_owned();
    Server {
        child,
        base: format!("ws://{addr}"),
    }
}

fn shape_ids(client: &Client) -> Vec<String> {
    let shapes = client.doc.get_or_insert_map("shapes");
    let txn = client.doc.transact();
    let mut ids: Vec<String> = shapes.keys(&txn).map(str::to_owned).collect();
    ids.sort();
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_a_peer_saw_is_lost_after_kill_9() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("durable.db");
    let mut server = spawn_server(&db);
    let mut observer = Client::connect(&server.base, "durable").await;
    let mut writer = Client::connect(&server.base, "durable").await;
    // The writer streams updates without waiting; the observer watches them arrive.
    let writing = tokio::spawn(async move {
        for i in 0..100_000 {
            writer
                .edit(|txn| put_shape(txn, &format!("d{i:06}"), i as f64))
                .await;
            if i % 50 == 0 {
                tokio::task::yield_now().await;
            }
        }
    });
    observer
        .until("300 updates seen", |c| {
            c.doc.get_or_insert_map("shapes").len(&c.doc.transact()) >= 300
        })
        .await;
    // Kill while updates are still streaming in.
    server.child.kill().expect("kill -9");
    let _ = server.child.wait();
    writing.abort();
    observer.drain(Duration::from_millis(100)).await;
    let seen = shape_ids(&observer);
    assert!(seen.len() >= 300);

    let mut server = spawn_server(&db);
    let mut fresh = Client::connect(&server.base, "durable").await;
    let expected = seen.len() as u32;
    fresh
        .until("every shape the observer saw", |c| {
            c.doc.get_or_insert_map("shapes").len(&c.doc.transact()) >= expected
        })
        .await;
    let restored = shape_ids(&fresh);
    let missing: Vec<&String> = seen.iter().filter(|id| !restored.contains(id)).collect();
    assert!(
        missing.is_empty(),
        "{} shapes seen by a peer were lost: {:?}",
        missing.len(),
        &missing[..missing.len().min(5)]
    );
    println!(
        "durability: {} shapes seen before kill -9, {} restored, 0 lost",
        seen.len(),
        restored.len()
    );
    let _ = server.child.kill();
    let _ = server.child.wait();
}

#[tokio::test]
async fn sigterm_flushes_and_exits_promptly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("term.db");
    let mut server = spawn_server(&db);
    let mut a = Client::connect(&server.base, "term").await;
    for i in 0..50 {
        a.edit(|txn| put_shape(txn, &format!("t{i}"), i as f64))
            .await;
    }
    let mut b = Client::connect(&server.base, "term").await;
    b.until("50 shapes", |c| {
        c.doc.get_or_insert_map("shapes").len(&c.doc.transact()) == 50
    })
    .await;
    let started = std::time::Instant::now();
    let pid = server.child.id().to_string();
    Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill -TERM");
    // Peers are told the server is going away (1001).
    assert_eq!(b.until_closed().await, Some(1001));
    let status = server.child.wait().expect("wait");
    assert!(status.success(), "exit status {status:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "shutdown took {:?}",
        started.elapsed()
    );
    let mut server = spawn_server(&db);
    let mut c = Client::connect(&server.base, "term").await;
    c.until("50 shapes after restart", |c| {
        c.doc.get_or_insert_map("shapes").len(&c.doc.transact()) == 50
    })
    .await;
    let _ = server.child.kill();
    let _ = server.child.wait();
}
