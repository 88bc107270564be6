//! Kill -9 durability: whatever any peer has received must survive the process being killed
//! mid-stream (every update is durable in the store before it is broadcast), with SQLite and
//! with PostgreSQL (its own schema; skipped when PostgreSQL is down, unless
//! `FAIRYRING_REQUIRE_SERVICES=1`).

use crate::support;

use std::process::Command;
use std::time::Duration;

use support::services::{Node, PgSchema};
use support::{Client, put_shape, shape_ids};
use yrs::{Map, Transact};

/// `--store` arguments of the SQLite database file `db`.
fn sqlite_args(db: &std::path::Path) -> Vec<String> {
    vec!["--store".into(), format!("sqlite:{}", db.display())]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_a_peer_saw_is_lost_after_kill_9() {
    let dir = tempfile::tempdir().expect("tempdir");
    kill_9_loses_nothing(&sqlite_args(&dir.path().join("durable.db"))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_a_peer_saw_is_lost_after_kill_9_with_postgres() {
    let Some(pg) = PgSchema::fresh("durable").await else {
        return;
    };
    kill_9_loses_nothing(&pg.store_args()).await;
}

#[tokio::test]
async fn sigterm_flushes_and_exits_promptly() {
    let dir = tempfile::tempdir().expect("tempdir");
    sigterm_flushes(&sqlite_args(&dir.path().join("term.db"))).await;
}

#[tokio::test]
async fn sigterm_flushes_and_exits_promptly_with_postgres() {
    let Some(pg) = PgSchema::fresh("term").await else {
        return;
    };
    sigterm_flushes(&pg.store_args()).await;
}

/// `--store-schema` is taken as named: a schema whose name holds SQL keywords, upper case, a
/// space and a hyphen (written into SQL unquoted, such a name was refused or failed to parse)
/// keeps what the server flushed across its restart, in the schema of exactly that name.
#[tokio::test]
async fn a_store_schema_named_like_sql_keywords_in_upper_case_keeps_its_rooms() {
    let Some(mut pg) = PgSchema::fresh("named").await else {
        return;
    };
    pg.schema = format!("Select From-{}", pg.schema);
    sigterm_flushes(&pg.store_args()).await;
    let pool = sqlx::PgPool::connect(&pg.url).await.expect("postgres");
    let tables: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = $1",
    )
    .bind(&pg.schema)
    .fetch_one(&pool)
    .await
    .expect("tables");
    pool.close().await;
    assert!(tables > 5, "the tables are in {:?}: {tables}", pg.schema);
}

async fn kill_9_loses_nothing(store: &[String]) {
    let mut server = Node::spawn(store);
    let mut observer = Client::connect(&server.ws(), "durable").await;
    let mut writer = Client::connect(&server.ws(), "durable").await;
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
    server.kill();
    writing.abort();
    observer.drain(Duration::from_millis(100)).await;
    let seen = shape_ids(&observer);
    assert!(seen.len() >= 300);

    let server = Node::spawn(store);
    let mut fresh = Client::connect(&server.ws(), "durable").await;
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
}

async fn sigterm_flushes(store: &[String]) {
    let mut server = Node::spawn(store);
    let mut a = Client::connect(&server.ws(), "term").await;
    for i in 0..50 {
        a.edit(|txn| put_shape(txn, &format!("t{i}"), i as f64))
            .await;
    }
    let mut b = Client::connect(&server.ws(), "term").await;
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
    let server = Node::spawn(store);
    let mut c = Client::connect(&server.ws(), "term").await;
    c.until("50 shapes after restart", |c| {
        c.doc.get_or_insert_map("shapes").len(&c.doc.transact()) == 50
    })
    .await;
    drop(server);
}
