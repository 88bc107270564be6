//! The nodes of a scaled-out run of `fairyring bench` (several `--url`s): which node each
//! client connects to ([`Placement`]), the server PIDs matched to the nodes
//! ([`server_pids`]), and what is sampled from each node around the measurement window
//! ([`NodeSample`]: CPU time and RSS from `/proc`, pub/sub counters and loaded rooms from its
//! `/metrics`). Knows nothing about sockets or documents; reads `/metrics` over HTTP only.

use super::process::{self, Target};

/// Pub/sub room messages a node received from other nodes (`/metrics`).
const MESSAGES_IN: &str = "fairyring_pubsub_messages_total{reason=\"in\"}";
/// Their payload bytes.
const BYTES_IN: &str = "fairyring_pubsub_bytes_total{reason=\"in\"}";
/// Rooms loaded on the node.
const ROOMS_LOADED: &str = "fairyring_rooms_loaded";
/// Update frames the node's rooms broadcast (one per merged group, to each of its peers).
const UPDATE_FRAMES: &str = "fairyring_updates_out_total";
/// Group commits of the node's store.
const COMMITS: &str = "fairyring_store_commit_seconds_count";
/// How long one `/metrics` request may take before the sample is left empty.
const METRICS_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Why the nodes of a run could not be set up from the flags.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum NodesError {
    /// `--room-nodes` is 0 or more than the nodes given.
    #[error("--room-nodes must be between 1 and the number of --url nodes ({nodes}), not {asked}")]
    RoomNodes { asked: usize, nodes: usize },
    /// `--server-pid` lists neither one PID nor one per node.
    #[error(
        "--server-pid takes one PID or one per --url node ({nodes}), in the same order; got {pids}"
    )]
    PidCount { pids: usize, nodes: usize },
}

/// Which node each client of the run connects to.
///
/// Client `i` is in room `i mod rooms` and is that room's `j = i / rooms`-th client. A room
/// spans `per_room` nodes starting at its first node, and its clients alternate over them:
/// client `j` of room `r` is on node `(first(r) + j mod per_room) mod nodes`. By default every
/// room spans every node from node 0 (the bench's behaviour before `--room-nodes`); with
/// `--room-nodes K` room `r` spans nodes `r mod N … r+K-1 mod N`, so that each node holds only
/// its share (`K / N`) of the rooms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    nodes: usize,
    rooms: usize,
    per_room: usize,
    /// Room `r` starts at node `r mod nodes` (else at node 0).
    rotate: bool,
}

impl Placement {
    /// Every client on one node.
    pub fn single() -> Self {
        Placement {
            nodes: 1,
            rooms: 1,
            per_room: 1,
            rotate: false,
        }
    }

    /// `rooms` rooms over `nodes` nodes, each room on `room_nodes` of them (every node when
    /// `None`).
    pub fn new(nodes: usize, rooms: usize, room_nodes: Option<usize>) -> Result<Self, NodesError> {
        let nodes = nodes.max(1);
        let per_room = match room_nodes {
            None => nodes,
            Some(k) if (1..=nodes).contains(&k) => k,
            Some(asked) => return Err(NodesError::RoomNodes { asked, nodes }),
        };
        Ok(Placement {
            nodes,
            rooms: rooms.max(1),
            per_room,
            rotate: room_nodes.is_some(),
        })
    }

    /// Number of nodes.
    pub fn nodes(&self) -> usize {
        self.nodes
    }

    /// The node client `client` connects to.
    pub fn node_of(&self, client: usize) -> usize {
        let room = client % self.rooms;
        let nth = client / self.rooms;
        let first = if self.rotate { room % self.nodes } else { 0 };
        (first + nth % self.per_room) % self.nodes
    }

    /// How many of the run's rooms have clients on `node`, given `clients` clients.
    pub fn rooms_on(&self, node: usize, clients: usize) -> usize {
        (0..self.rooms.min(clients))
            .filter(|&room| {
                (room..clients)
                    .step_by(self.rooms)
                    .take(self.per_room)
                    .any(|client| self.node_of(client) == node)
            })
            .count()
    }
}

/// The server PID of each node (`None` where none was given): no PID, one PID per node in the
/// order of `--url`, or one PID for a single node (or, as before several PIDs were taken, for
/// the first of several nodes).
pub fn server_pids(pids: &[u32], nodes: usize) -> Result<Vec<Option<u32>>, NodesError> {
    let nodes = nodes.max(1);
    if pids.len() > 1 && pids.len() != nodes {
        return Err(NodesError::PidCount {
            pids: pids.len(),
            nodes,
        });
    }
    Ok((0..nodes).map(|i| pids.get(i).copied()).collect())
}

/// The value of the sample named `series` (metric name plus labels exactly as the server
/// writes them) in a Prometheus text exposition.
pub fn metric_value(exposition: &str, series: &str) -> Option<f64> {
    exposition.lines().find_map(|line| {
        let rest = line.strip_prefix(series)?;
        let value = rest.strip_prefix(' ')?.split_whitespace().next()?;
        value.parse().ok()
    })
}

/// The value of counter `series` in an exposition: 0 when absent (a labelled counter appears
/// only once it has counted; a node that never received a room message has no `in` series).
pub fn counter_value(exposition: &str, series: &str) -> f64 {
    metric_value(exposition, series).unwrap_or(0.0)
}

/// What one node showed at one moment.
#[derive(Debug, Clone, Copy, Default)]
pub struct NodeSample {
    /// CPU seconds of its process.
    pub cpu_seconds: Option<f64>,
    /// Its resident memory, KiB.
    pub rss_kib: Option<u64>,
    /// Room messages received from other nodes, in all.
    pub messages_in: Option<f64>,
    /// Their payload bytes.
    pub bytes_in: Option<f64>,
    /// Rooms loaded.
    pub rooms_loaded: Option<f64>,
    /// Update frames broadcast, in all (`fairyring_updates_out_total`).
    pub update_frames: Option<f64>,
    /// Group commits, in all.
    pub commits: Option<f64>,
}

/// A node to sample: its PID and the address of its `/metrics`.
#[derive(Debug, Clone)]
pub struct Node {
    /// `--url` as given.
    pub url: String,
    /// Its server process, if given.
    pub pid: Option<u32>,
    /// `http://HOST:PORT/metrics`, if the URL has a host.
    metrics: Option<String>,
    /// Bearer token for `/metrics` (`--token`), for a server that wants one.
    token: Option<String>,
}

impl Node {
    /// The node at `url` (a `ws://HOST:PORT` base or template) with process `pid`.
    pub fn new(url: &str, pid: Option<u32>, token: Option<String>) -> Self {
        let metrics = super::fairies::http_base(url)
            .ok()
            .map(|base| format!("{base}/metrics"));
        Node {
            url: url.to_owned(),
            pid,
            metrics,
            token,
        }
    }

    /// Samples the process and the node's `/metrics` (fields the node does not give are
    /// `None`: no PID, `/metrics` elsewhere or not a fairyring server).
    pub async fn sample(&self, http: &reqwest::Client) -> NodeSample {
        let target = self.pid.map(Target::Pid);
        let exposition = match &self.metrics {
            Some(url) => fetch(http, url, self.token.as_deref()).await,
            None => None,
        };
        let metric = |series| {
            exposition
                .as_deref()
                .and_then(|text| metric_value(text, series))
        };
        let counter = |series| {
            exposition
                .as_deref()
                .map(|text| counter_value(text, series))
        };
        NodeSample {
            cpu_seconds: target.and_then(process::cpu_seconds),
            rss_kib: target.and_then(process::rss_kib),
            messages_in: counter(MESSAGES_IN),
            bytes_in: counter(BYTES_IN),
            rooms_loaded: metric(ROOMS_LOADED),
            update_frames: counter(UPDATE_FRAMES),
            commits: counter(COMMITS),
        }
    }
}

async fn fetch(http: &reqwest::Client, url: &str, token: Option<&str>) -> Option<String> {
    let mut request = http.get(url).timeout(METRICS_TIMEOUT);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.ok()?.error_for_status().ok()?;
    response.text().await.ok()
}

/// Samples every node at once.
pub async fn sample_all(nodes: &[Node], http: &reqwest::Client) -> Vec<NodeSample> {
    futures_util::future::join_all(nodes.iter().map(|node| node.sample(http))).await
}

/// One node's line of the report: the window's deltas between `before` and `after`, over
/// `wall` seconds.
pub fn report(
    node: &Node,
    before: &NodeSample,
    after: &NodeSample,
    wall: f64,
    clients: usize,
    rooms_placed: usize,
) -> serde_json::Value {
    let delta = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) => Some(b - a),
        _ => None,
    };
    let per_sec = |d: Option<f64>| d.filter(|_| wall > 0.0).map(|d| d / wall);
    let messages = delta(before.messages_in, after.messages_in);
    let bytes = delta(before.bytes_in, after.bytes_in);
    serde_json::json!({
        "url": node.url,
        "pid": node.pid,
        "clients": clients,
        "rooms_placed": rooms_placed,
        "rooms_loaded": after.rooms_loaded,
        "cpu_cores": per_sec(delta(before.cpu_seconds, after.cpu_seconds)),
        "rss_kib_under_load": after.rss_kib,
        "pubsub_messages_in": messages,
        "pubsub_messages_in_per_sec": per_sec(messages),
        "pubsub_bytes_in": bytes,
        "pubsub_bytes_in_per_sec": per_sec(bytes),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn by_default_each_room_has_clients_on_every_node() {
        let p = Placement::new(2, 3, None).unwrap_or_else(|e| panic!("{e}"));
        let nodes: Vec<usize> = (0..7).map(|i| p.node_of(i)).collect();
        assert_eq!(nodes, [0, 0, 0, 1, 1, 1, 0]);
        for room in 0..3 {
            let of_room: Vec<usize> = (room..12).step_by(3).map(|i| p.node_of(i)).collect();
            assert!(of_room.contains(&0) && of_room.contains(&1), "room {room}");
        }
        assert_eq!(p.rooms_on(0, 12), 3);
        assert_eq!(p.rooms_on(1, 12), 3);
        assert_eq!(Placement::single().node_of(5), 0, "one node by default");
    }

    #[test]
    fn room_nodes_spread_the_rooms() {
        // 4 nodes, 8 rooms, each on 2 nodes: room r on nodes r mod 4 and r+1 mod 4.
        let p = Placement::new(4, 8, Some(2)).unwrap_or_else(|e| panic!("{e}"));
        let clients = 32; // 4 per room, 2 on each of its nodes
        for room in 0..8 {
            let of_room: Vec<usize> = (room..clients).step_by(8).map(|i| p.node_of(i)).collect();
            assert_eq!(
                of_room,
                [room % 4, (room + 1) % 4, room % 4, (room + 1) % 4]
            );
        }
        // Every node holds half of the rooms: its own two as first node, two as second.
        for node in 0..4 {
            assert_eq!(p.rooms_on(node, clients), 4, "node {node}");
        }
        // With one node per room, nothing crosses nodes.
        let one = Placement::new(4, 8, Some(1)).unwrap_or_else(|e| panic!("{e}"));
        for client in 0..clients {
            assert_eq!(one.node_of(client), (client % 8) % 4);
        }
        assert_eq!(one.rooms_on(3, clients), 2);
        // K = N rotates the first node but still spans every node.
        let all = Placement::new(3, 5, Some(3)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(all.node_of(4), 1);
        assert_eq!(all.node_of(4 + 5), 2);
        assert_eq!(all.node_of(4 + 10), 0);
    }

    #[test]
    fn room_nodes_are_bounded_by_the_nodes() {
        assert_eq!(
            Placement::new(4, 10, Some(0)),
            Err(NodesError::RoomNodes { asked: 0, nodes: 4 })
        );
        assert_eq!(
            Placement::new(4, 10, Some(5)),
            Err(NodesError::RoomNodes { asked: 5, nodes: 4 })
        );
        assert!(Placement::new(4, 10, Some(4)).is_ok());
    }

    #[test]
    fn pids_are_matched_to_the_nodes_in_order() {
        assert_eq!(server_pids(&[], 3), Ok(vec![None, None, None]));
        assert_eq!(server_pids(&[7], 1), Ok(vec![Some(7)]));
        assert_eq!(server_pids(&[7], 2), Ok(vec![Some(7), None]));
        assert_eq!(
            server_pids(&[7, 8, 9, 10], 4),
            Ok(vec![Some(7), Some(8), Some(9), Some(10)])
        );
        assert_eq!(
            server_pids(&[7, 8], 4),
            Err(NodesError::PidCount { pids: 2, nodes: 4 })
        );
        assert_eq!(
            server_pids(&[7, 8], 1),
            Err(NodesError::PidCount { pids: 2, nodes: 1 })
        );
    }

    #[test]
    fn pid_lists_parse_from_the_command_line() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            bench: super::super::BenchArgs,
        }
        let parse = |list: &str| {
            Cli::try_parse_from(["bench", "--url", "ws://a:1,ws://b:2", "--server-pid", list])
                .map(|cli| cli.bench.server_pid)
        };
        assert_eq!(parse("11,22").ok(), Some(vec![11, 22]));
        assert_eq!(parse("11").ok(), Some(vec![11]));
        assert!(parse("11,x").is_err());
        assert!(parse("-3").is_err());
    }

    #[test]
    fn metrics_are_read_by_series() {
        let text = "# HELP fairyring_pubsub_messages_total Room messages.\n\
                    # TYPE fairyring_pubsub_messages_total counter\n\
                    fairyring_pubsub_messages_total{reason=\"in\"} 1234\n\
                    fairyring_pubsub_messages_total{reason=\"out\"} 99\n\
                    fairyring_pubsub_bytes_total{reason=\"in\"} 5.5e3\n\
                    fairyring_rooms_loaded 42\n\
                    fairyring_rooms_loaded_peak 50\n";
        assert_eq!(metric_value(text, MESSAGES_IN), Some(1234.0));
        assert_eq!(metric_value(text, BYTES_IN), Some(5500.0));
        assert_eq!(metric_value(text, ROOMS_LOADED), Some(42.0));
        assert_eq!(metric_value(text, "fairyring_missing"), None);
        assert_eq!(
            metric_value("fairyring_rooms_loaded x\n", ROOMS_LOADED),
            None
        );
        // A counter that never counted is not in the exposition: it is 0.
        assert_eq!(
            counter_value("fairyring_rooms_loaded 3\n", MESSAGES_IN),
            0.0
        );
        assert_eq!(counter_value(text, MESSAGES_IN), 1234.0);
    }

    #[test]
    fn a_node_line_gives_the_window_deltas() {
        let node = Node::new("ws://127.0.0.1:9/", Some(1), None);
        assert_eq!(node.metrics.as_deref(), Some("http://127.0.0.1:9/metrics"));
        let before = NodeSample {
            cpu_seconds: Some(10.0),
            rss_kib: Some(1),
            messages_in: Some(100.0),
            bytes_in: Some(1000.0),
            rooms_loaded: Some(0.0),
            ..NodeSample::default()
        };
        let after = NodeSample {
            cpu_seconds: Some(15.0),
            rss_kib: Some(2048),
            messages_in: Some(300.0),
            bytes_in: Some(5000.0),
            rooms_loaded: Some(200.0),
            ..NodeSample::default()
        };
        let line = report(&node, &before, &after, 10.0, 400, 200);
        assert_eq!(line["cpu_cores"], 0.5);
        assert_eq!(line["rss_kib_under_load"], 2048);
        assert_eq!(line["pubsub_messages_in"], 200.0);
        assert_eq!(line["pubsub_bytes_in_per_sec"], 400.0);
        assert_eq!(line["rooms_loaded"], 200.0);
        let empty = report(&node, &NodeSample::default(), &after, 10.0, 0, 0);
        assert!(empty["cpu_cores"].is_null());
    }
}
