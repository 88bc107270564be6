//! A Redis Cluster of a test's own: three masters of the machine's `redis-server` on free
//! loopback ports, each in its own folder of a temporary directory, joined with
//! `redis-cli --cluster create` (no replicas), killed when dropped. Never the machine's Redis.
//! Without `redis-server` or `redis-cli` a test skips, unless `FAIRYRING_REQUIRE_SERVICES=1`
//! makes that a failure.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::services::unavailable;

/// Masters of a test cluster.
const MASTERS: usize = 3;

/// One `redis-server` of the cluster.
struct Master {
    port: u16,
    dir: PathBuf,
    child: Option<Child>,
}

impl Master {
    fn spawn(&mut self) -> std::io::Result<()> {
        let port = self.port.to_string();
        let child = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &port])
            .args(["--cluster-enabled", "yes"])
            .args(["--cluster-config-file", "nodes.conf"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .stdout(Stdio::null())
            .spawn()?;
        self.child = Some(child);
        super::services::until_listening(self.port);
        Ok(())
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// `redis-cli -p PORT ARGS…`, its output.
    fn cli(&self, args: &[&str]) -> String {
        let output = Command::new("redis-cli")
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(args)
            .output()
            .expect("redis-cli runs");
        String::from_utf8_lossy(&output.stdout).into_owned()
    }
}

/// A three-master Redis Cluster on loopback.
pub struct OwnCluster {
    masters: Vec<Master>,
    _dir: tempfile::TempDir,
}

impl OwnCluster {
    /// Starts one and waits until every node says `cluster_state:ok`; `None` (after saying
    /// why) when the machine has no `redis-server` or `redis-cli`.
    pub async fn start() -> Option<OwnCluster> {
        for tool in ["redis-server", "redis-cli"] {
            if let Err(error) = Command::new(tool).arg("--version").output() {
                unavailable(tool, &error);
                return None;
            }
        }
        let dir = tempfile::tempdir().expect("temp dir");
        let mut masters = Vec::new();
        for (i, port) in free_ports(MASTERS).into_iter().enumerate() {
            let dir = dir.path().join(format!("node{i}"));
            std::fs::create_dir(&dir).expect("node dir");
            let mut master = Master {
                port,
                dir,
                child: None,
            };
            master.spawn().expect("redis-server starts");
            masters.push(master);
        }
        let cluster = OwnCluster { masters, _dir: dir };
        let addresses: Vec<String> = cluster
            .masters
            .iter()
            .map(|m| format!("127.0.0.1:{}", m.port))
            .collect();
        let created = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addresses)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .status()
            .expect("redis-cli --cluster create runs");
        assert!(created.success(), "redis-cli --cluster create failed");
        cluster.until_ok().await;
        Some(cluster)
    }

    /// Waits until every master says `cluster_state:ok` and knows all the others.
    pub async fn until_ok(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        for master in &self.masters {
            loop {
                let info = master.cli(&["cluster", "info"]);
                let known = format!("cluster_known_nodes:{MASTERS}");
                if info.contains("cluster_state:ok") && info.contains(&known) {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "cluster node :{} not ok: {info}",
                    master.port
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }

    /// `redis://127.0.0.1:PORT` of every master, comma-separated (the `--pubsub` seeds).
    pub fn seeds(&self) -> String {
        self.urls().join(",")
    }

    /// `redis://127.0.0.1:PORT` of each master.
    pub fn urls(&self) -> Vec<String> {
        self.masters
            .iter()
            .map(|m| format!("redis://127.0.0.1:{}", m.port))
            .collect()
    }

    /// kill -9 of master `i`.
    pub fn kill(&mut self, i: usize) {
        self.masters[i].kill();
    }

    /// Starts master `i` again on its port and folder (its cluster configuration kept, its
    /// data gone), and waits until the cluster is ok.
    pub async fn restart(&mut self, i: usize) {
        self.masters[i].spawn().expect("redis-server restarts");
        self.until_ok().await;
    }

    /// Moves the hash slot of `channel` (which holds no key) from master `from` to master `to`
    /// (`CLUSTER SETSLOT` … `IMPORTING`, `MIGRATING`, `NODE`), as resharding does, and waits
    /// until the cluster is ok. Redis then unsubscribes the slot's sharded channels' clients on
    /// `from`.
    pub async fn move_slot(&self, channel: &str, from: usize, to: usize) {
        let slot = self.masters[from].cli(&["cluster", "keyslot", channel]);
        let slot = slot.trim();
        let keys = self.masters[from].cli(&["cluster", "countkeysinslot", slot]);
        assert_eq!(keys.trim(), "0", "slot {slot} holds keys");
        let id = |i: usize| self.masters[i].cli(&["cluster", "myid"]).trim().to_owned();
        let (source, target) = (id(from), id(to));
        let steps = [
            (
                to,
                ["cluster", "setslot", slot, "importing", source.as_str()],
            ),
            (
                from,
                ["cluster", "setslot", slot, "migrating", target.as_str()],
            ),
            (to, ["cluster", "setslot", slot, "node", target.as_str()]),
            (from, ["cluster", "setslot", slot, "node", target.as_str()]),
        ];
        for (master, args) in steps {
            let answer = self.masters[master].cli(&args);
            assert_eq!(answer.trim(), "OK", "{args:?} on master {master}: {answer}");
        }
        self.until_ok().await;
    }

    /// Which master owns `channel`'s slot: the one that runs `SPUBLISH` on it instead of
    /// redirecting it (`MOVED`).
    pub async fn owner(&self, channel: &str) -> usize {
        for (i, url) in self.urls().iter().enumerate() {
            let client = redis::Client::open(url.as_str()).expect("redis url");
            let mut connection = client
                .get_multiplexed_async_connection()
                .await
                .expect("cluster node");
            let published = redis::cmd("SPUBLISH")
                .arg(channel)
                .arg("probe")
                .query_async::<i64>(&mut connection)
                .await;
            if published.is_ok() {
                return i;
            }
        }
        panic!("no master owns {channel}");
    }

    /// How many sharded channels matching `pattern` have subscribers, over every master.
    pub async fn shard_channels(&self, pattern: &str) -> usize {
        let mut count = 0;
        for url in self.urls() {
            let client = redis::Client::open(url.as_str()).expect("redis url");
            let mut connection = client
                .get_multiplexed_async_connection()
                .await
                .expect("cluster node");
            let channels: Vec<String> = redis::cmd("PUBSUB")
                .arg("SHARDCHANNELS")
                .arg(pattern)
                .query_async(&mut connection)
                .await
                .expect("PUBSUB SHARDCHANNELS");
            count += channels.len();
        }
        count
    }
}

impl Drop for OwnCluster {
    fn drop(&mut self) {
        for master in &mut self.masters {
            master.kill();
        }
    }
}

/// `n` free loopback ports whose cluster bus port (`+10000`) is free too.
fn free_ports(n: usize) -> Vec<u16> {
    let mut ports = Vec::new();
    let mut held = Vec::new();
    while ports.len() < n {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        let port = listener.local_addr().expect("bound").port();
        let bus = port
            .checked_add(10_000)
            .and_then(|bus| std::net::TcpListener::bind(("127.0.0.1", bus)).ok());
        if let Some(bus) = bus {
            ports.push(port);
            held.push(bus);
        }
        held.push(listener);
    }
    ports
}
