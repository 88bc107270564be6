//! The machine's PostgreSQL and Redis for scale-out tests, and `fairyring serve` processes.
//!
//! Each test gets its own PostgreSQL schema and Redis channel prefix. When a service is down a
//! test skips with a printed reason, unless `FAIRYRING_REQUIRE_SERVICES=1` (CI) makes that a
//! failure.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The test database (`FAIRYRING_TEST_PG_URL`, default the CI machine's).
pub fn pg_url() -> String {
    std::env::var("FAIRYRING_TEST_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// The test Redis (`FAIRYRING_TEST_REDIS_URL`, default the CI machine's).
pub fn redis_url() -> String {
    std::env::var("FAIRYRING_TEST_REDIS_URL")
        .unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}

/// Says why a test skips, or fails when `FAIRYRING_REQUIRE_SERVICES=1`.
pub fn unavailable(service: &str, error: &dyn std::fmt::Display) {
    let required = std::env::var("FAIRYRING_REQUIRE_SERVICES").as_deref() == Ok("1");
    assert!(!required, "{service} required but unreachable: {error}");
    eprintln!("skipping: {service} unreachable: {error}");
}

/// Waits until a server listens on loopback `port` ([`super::TIMEOUT`] at most).
pub fn until_listening(port: u16) {
    let deadline = std::time::Instant::now() + super::TIMEOUT;
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "nothing listens on :{port}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A PostgreSQL schema of its own, dropped when the value is dropped.
pub struct PgSchema {
    pub url: String,
    pub schema: String,
}

impl PgSchema {
    /// A fresh schema name, or `None` (after saying why) when PostgreSQL is down.
    pub async fn fresh(tag: &str) -> Option<PgSchema> {
        let url = pg_url();
        match sqlx::PgPool::connect(&url).await {
            Ok(pool) => pool.close().await,
            Err(error) => {
                unavailable("PostgreSQL", &error);
                return None;
            }
        }
        Some(PgSchema {
            url,
            schema: format!("t_{tag}_{:08x}", rand::random::<u32>()),
        })
    }

    /// `--store URL --store-schema NAME`.
    pub fn store_args(&self) -> Vec<String> {
        vec![
            "--store".into(),
            self.url.clone(),
            "--store-schema".into(),
            self.schema.clone(),
        ]
    }
}

impl Drop for PgSchema {
    fn drop(&mut self) {
        // Best effort, outside any runtime: psql is on the machine that runs PostgreSQL.
        let _ = Command::new("psql")
            .arg(&self.url)
            .args(["-q", "-c"])
            .arg(format!(
                "DROP SCHEMA IF EXISTS \"{}\" CASCADE",
                self.schema.replace('"', "\"\"")
            ))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// A Redis channel prefix of its own, or `None` (after saying why) when Redis is down.
pub async fn redis_prefix(tag: &str) -> Option<String> {
    let url = redis_url();
    let reachable = async {
        let client = redis::Client::open(url.as_str())?;
        let mut connection = client.get_multiplexed_async_connection().await?;
        redis::cmd("PING")
            .query_async::<String>(&mut connection)
            .await
    };
    match tokio::time::timeout(Duration::from_secs(3), reachable).await {
        Ok(Ok(_)) => Some(format!("t-{tag}-{:08x}", rand::random::<u32>())),
        Ok(Err(error)) => {
            unavailable("Redis", &error);
            None
        }
        Err(error) => {
            unavailable("Redis", &error);
            None
        }
    }
}

/// Kills the Redis subscription connections of a deployment's nodes (`CLIENT KILL` on the
/// connections named `PREFIX:sub:NODE`); returns how many.
pub async fn kill_subscriptions(prefix: &str) -> usize {
    let client = redis::Client::open(redis_url().as_str()).expect("redis url");
    let mut connection = client
        .get_multiplexed_async_connection()
        .await
        .expect("redis");
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query_async(&mut connection)
        .await
        .expect("CLIENT LIST");
    let wanted = format!("name={prefix}:sub:");
    let ids: Vec<String> = list
        .lines()
        .filter(|line| line.split(' ').any(|field| field.starts_with(&wanted)))
        .filter_map(|line| line.split(' ').find_map(|f| f.strip_prefix("id=")))
        .map(str::to_owned)
        .collect();
    for id in &ids {
        let _: i64 = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("ID")
            .arg(id)
            .query_async(&mut connection)
            .await
            .expect("CLIENT KILL");
    }
    ids.len()
}

/// A `fairyring serve` process on a free port.
pub struct Node {
    pub child: Child,
    /// `127.0.0.1:PORT`.
    pub addr: String,
}

impl Node {
    /// Starts `fairyring serve --listen 127.0.0.1:0 --insecure-no-auth ARGS…`.
    pub fn spawn(args: &[String]) -> Node {
        Node::spawn_with(args, |_| {})
    }

    /// [`Node::spawn`], with `configure` setting more of the command (environment, stderr)
    /// before it starts.
    pub fn spawn_with(args: &[String], configure: impl FnOnce(&mut Command)) -> Node {
        let mut command = Command::new(env!("CARGO_BIN_EXE_fairyring"));
        command
            .args(["serve", "--listen", "127.0.0.1:0", "--insecure-no-auth"])
            .args(args)
            .env("RUST_LOG", "warn")
            // The test harness keeps the cores busy with other tests: idle-class fairies
            // would wait for all of them (src/priority.rs).
            .env("FAIRYRING_BACKGROUND_PRIORITY", "nice")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        configure(&mut command);
        let mut child = command.spawn().expect("spawn fairyring");
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("first line");
        let addr = line
            .trim()
            .strip_prefix("listening on http://")
            .unwrap_or_else(|| panic!("listening line, got {line:?}"))
            .to_owned();
        Node { child, addr }
    }

    /// `ws://ADDR`, the base of room URLs.
    pub fn ws(&self) -> String {
        format!("ws://{}", self.addr)
    }

    /// `http://ADDR`.
    pub fn http(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// SIGSTOP: the process stalls, as in a long pause of its host, until [`Node::resume`].
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// SIGCONT after [`Node::pause`].
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill {signal} failed");
    }

    /// kill -9.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Scale-out node arguments: the shared store, and Redis under `prefix`.
pub fn node_args(pg: &PgSchema, prefix: &str) -> Vec<String> {
    let mut args = pg.store_args();
    args.extend([
        "--pubsub".into(),
        redis_url(),
        "--pubsub-prefix".into(),
        prefix.to_owned(),
    ]);
    args
}
