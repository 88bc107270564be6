//! Where the deployment's Redis is (`--pubsub`, `--pubsub-cluster`; docs/scaling.md "Redis
//! Cluster") and the connections to it: one Redis at one address, or a Redis Cluster reached
//! from one or more seed addresses, whose topology the `redis` crate's cluster connection
//! discovers and follows (`MOVED`/`ASK`, a master restarted or replaced).
//!
//! Owns the parsing of the addresses, the command connection ([`Commands`]: auto-reconnecting;
//! on a cluster each command or single-slot pipeline goes to the master owning its slot) and
//! the subscriber connections ([`Subscriber`]: RESP3 pushes; on a cluster every subscription is
//! sharded, `SSUBSCRIBE` to the master of the channel's slot). Knows nothing of what the
//! channels and keys mean ([`super::redis`], [`super::lease`], [`super::direct`] do).

use std::time::Duration;

use redis::aio::{AsyncPushSender, ConnectionLike, ConnectionManager, MultiplexedConnection};
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::{
    AsyncConnectionConfig, Client, Cmd, ConnectionInfo, IntoConnectionInfo, Pipeline,
    ProtocolVersion, RedisFuture, Value,
};

use super::PubSubError;

/// How long one command may wait for a cluster node's answer.
const CLUSTER_RESPONSE_TIMEOUT: Duration = Duration::from_secs(1);
/// How long one command may take on a cluster, its retries and redirections included (a lease
/// renewal must fail well before its holder gives up, 4 s after its last renewal).
const CLUSTER_OVERALL_TIMEOUT: Duration = Duration::from_secs(2);
/// Retries of a cluster command whose node failed (the crate's default, 16 with waits growing
/// to minutes, would hold the publisher for as long on a dead master).
const CLUSTER_RETRIES: u32 = 3;
/// Bounds of the wait between two retries, in milliseconds.
const CLUSTER_RETRY_WAIT_MS: (u64, u64) = (50, 500);

/// How long one command on one Redis may wait for its answer, and a connection attempt for
/// its handshake, unless `--pubsub-timeout-ms` says otherwise.
pub const DEFAULT_DEADLINE: Duration = Duration::from_millis(500);

/// Where the deployment's Redis is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Servers {
    /// One Redis (`--pubsub redis://HOST:PORT`): a standalone server, or a primary.
    Single(String),
    /// A Redis Cluster (`--pubsub-cluster`), reached from these seed addresses (any of its
    /// nodes; the others are discovered).
    Cluster(Vec<String>),
}

/// The deployment's Redis, and the deadline of every call to it (`--pubsub-timeout-ms`): a
/// Redis that stalls without closing fails the call, and rooms fall back on catching up from
/// the store (docs/operations.md "What happens when Redis stalls").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Its addresses.
    pub servers: Servers,
    /// How long a command may wait for its answer and a connection attempt for its handshake
    /// (on a cluster: each node's answer, within the cluster's overall bound).
    pub deadline: Duration,
}

impl Target {
    /// The same Redis with calls bounded by `deadline` (at least 1 ms).
    pub fn with_deadline(self, deadline: Duration) -> Self {
        Target {
            deadline: deadline.max(Duration::from_millis(1)),
            ..self
        }
    }

    /// The target of `--pubsub` (`redis://HOST:PORT`, comma-separated seeds with `cluster`).
    /// Several addresses without `cluster` are refused: nodes would otherwise use the first
    /// alone, a deployment split over unrelated Redis servers.
    pub fn parse(pubsub: &str, cluster: bool) -> Result<Self, PubSubError> {
        let urls: Vec<String> = pubsub.split(',').map(|u| u.trim().to_owned()).collect();
        for url in &urls {
            connection_info(url)?;
        }
        let servers = match (cluster, urls.as_slice()) {
            (true, _) => Servers::Cluster(urls),
            (false, [one]) => Servers::Single(one.clone()),
            (false, _) => return Err(PubSubError::SeedsWithoutCluster(urls.len())),
        };
        Ok(Target {
            servers,
            deadline: DEFAULT_DEADLINE,
        })
    }

    /// Whether this is a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        matches!(self.servers, Servers::Cluster(_))
    }

    /// The command publishing to a node's own channels (the nodes channel, a node's channel):
    /// plain on one Redis, sharded on a cluster (where a plain `PUBLISH` is broadcast to every
    /// shard and counts only the receivers of the node that ran it).
    pub(super) fn own_publish_command(&self) -> &'static str {
        match self.servers {
            Servers::Single(_) => "PUBLISH",
            Servers::Cluster(_) => "SPUBLISH",
        }
    }

    /// A command connection. On one Redis, a server that is a cluster node is refused (its
    /// keys and sharded channels of other slots would answer `MOVED`).
    pub(super) async fn commands(&self) -> Result<Commands, PubSubError> {
        match &self.servers {
            Servers::Single(url) => {
                let config = redis::aio::ConnectionManagerConfig::new()
                    .set_response_timeout(Some(self.deadline))
                    .set_connection_timeout(Some(self.deadline));
                let mut manager = client(url)?
                    .get_connection_manager_with_config(config)
                    .await?;
                refuse_cluster_node(url, &mut manager).await?;
                Ok(Commands::Single(manager))
            }
            Servers::Cluster(seeds) => {
                let client = cluster_builder(seeds, self.deadline)?.build()?;
                let connection = client
                    .get_async_connection()
                    .await
                    .map_err(|error| cluster_error(seeds, error))?;
                Ok(Commands::Cluster(connection))
            }
        }
    }

    /// A subscriber connection named `name` whose pushes (messages, confirmations, a
    /// disconnection) go to `push`.
    pub(super) async fn subscriber(
        &self,
        push: impl AsyncPushSender,
        name: &str,
    ) -> Result<Subscriber, PubSubError> {
        let subscriber = match &self.servers {
            Servers::Single(url) => {
                let config = AsyncConnectionConfig::new()
                    .set_push_sender(push)
                    .set_response_timeout(Some(self.deadline))
                    .set_connection_timeout(Some(self.deadline));
                let connection = client(url)?
                    .get_multiplexed_async_connection_with_config(&config)
                    .await?;
                Subscriber::Single(connection)
            }
            Servers::Cluster(seeds) => {
                let client = cluster_builder(seeds, self.deadline)?
                    .push_sender(push)
                    .build()?;
                let connection = client
                    .get_async_connection()
                    .await
                    .map_err(|error| cluster_error(seeds, error))?;
                Subscriber::Cluster(connection)
            }
        };
        subscriber.set_name(name).await?;
        Ok(subscriber)
    }
}

/// The connection info of `url` (`redis://HOST:PORT` or `rediss://…`), speaking RESP3.
fn connection_info(url: &str) -> Result<ConnectionInfo, PubSubError> {
    if !(url.starts_with("redis://") || url.starts_with("rediss://")) {
        return Err(PubSubError::UnsupportedUrl(url.to_owned()));
    }
    let info = url.into_connection_info()?;
    let resp3 = info
        .redis_settings()
        .clone()
        .set_protocol(ProtocolVersion::RESP3);
    Ok(info.set_redis_settings(resp3))
}

/// A RESP3 client of `url` (`redis://HOST:PORT` or `rediss://…`).
pub(super) fn client(url: &str) -> Result<Client, PubSubError> {
    Ok(Client::open(connection_info(url)?)?)
}

/// A cluster client of `seeds`: each node's answer within `deadline` (and the cluster's
/// own per-node bound), every command within the overall bound.
fn cluster_builder(
    seeds: &[String],
    deadline: Duration,
) -> Result<ClusterClientBuilder, PubSubError> {
    let infos = seeds
        .iter()
        .map(|seed| connection_info(seed))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ClusterClientBuilder::new(infos)
        .use_protocol(ProtocolVersion::RESP3)
        .response_timeout(CLUSTER_RESPONSE_TIMEOUT.min(deadline))
        .overall_response_timeout(Some(CLUSTER_OVERALL_TIMEOUT))
        .retries(CLUSTER_RETRIES)
        .min_retry_wait(CLUSTER_RETRY_WAIT_MS.0)
        .max_retry_wait(CLUSTER_RETRY_WAIT_MS.1))
}

fn cluster_error(seeds: &[String], error: redis::RedisError) -> PubSubError {
    PubSubError::Cluster {
        seeds: seeds.join(","),
        error,
    }
}

/// Refuses a Redis that is a cluster node (`INFO cluster` says `cluster_enabled:1`) as a
/// single `--pubsub`. A Redis that does not answer `INFO` (a proxy, a restricted user) is
/// taken as it is.
async fn refuse_cluster_node(
    url: &str,
    connection: &mut ConnectionManager,
) -> Result<(), PubSubError> {
    let info = redis::cmd("INFO")
        .arg("cluster")
        .query_async::<String>(connection)
        .await;
    match info {
        Ok(info) if info.lines().any(|line| line.trim() == "cluster_enabled:1") => {
            Err(PubSubError::ClusterNode(url.to_owned()))
        }
        Ok(_) => Ok(()),
        Err(error) => {
            tracing::debug!(%error, "INFO cluster unanswered; taken as a single Redis");
            Ok(())
        }
    }
}

/// A command connection: [`ConnectionLike`], so `query_async` works on it alike on one Redis
/// and on a cluster. Clones share the connection.
#[derive(Clone)]
pub enum Commands {
    /// One Redis, reconnecting on its own.
    Single(ConnectionManager),
    /// A cluster: each command goes to its slot's master (a pipeline's commands must share one
    /// slot), following redirections and topology changes.
    Cluster(ClusterConnection),
}

impl ConnectionLike for Commands {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Commands::Single(connection) => connection.req_packed_command(cmd),
            Commands::Cluster(connection) => connection.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Commands::Single(connection) => connection.req_packed_commands(pipeline, offset, count),
            Commands::Cluster(connection) => {
                connection.req_packed_commands(pipeline, offset, count)
            }
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Commands::Single(connection) => connection.get_db(),
            Commands::Cluster(connection) => connection.get_db(),
        }
    }
}

/// A subscriber connection. Its pushes go where [`Target::subscriber`] said; a
/// `Disconnection` push (of any node, on a cluster) means subscriptions may have been lost.
pub(super) enum Subscriber {
    Single(MultiplexedConnection),
    Cluster(ClusterConnection),
}

impl Subscriber {
    /// `CLIENT SETNAME` (on a cluster, on every node it is connected to: best effort, a node
    /// that is down must not stop the subscription).
    async fn set_name(&self, name: &str) -> Result<(), PubSubError> {
        let mut command = redis::cmd("CLIENT");
        command.arg("SETNAME").arg(name);
        match self {
            Subscriber::Single(connection) => {
                command.query_async::<()>(&mut connection.clone()).await?;
            }
            Subscriber::Cluster(connection) => {
                if let Err(error) = command.query_async::<()>(&mut connection.clone()).await {
                    tracing::debug!(%error, name, "naming a cluster subscriber failed");
                }
            }
        }
        Ok(())
    }

    /// Subscribes to one of the node's own channels (the nodes channel, its node channel):
    /// plain on one Redis, sharded on a cluster.
    pub(super) async fn subscribe_own(&self, channel: String) -> Result<(), PubSubError> {
        match self {
            Subscriber::Single(connection) => connection.clone().subscribe(channel).await?,
            Subscriber::Cluster(connection) => connection.clone().ssubscribe(channel).await?,
        }
        Ok(())
    }

    /// Sends `command CHANNEL` (a room channel's `SUBSCRIBE`, `SSUBSCRIBE`, `UNSUBSCRIBE` or
    /// `SUNSUBSCRIBE`) and waits for its confirmation. A cluster carries sharded commands
    /// only (its room channels are sharded): a plain one is refused there.
    pub(super) async fn change(
        &self,
        command: &'static str,
        channel: String,
    ) -> redis::RedisResult<()> {
        match self {
            Subscriber::Single(connection) => {
                redis::cmd(command)
                    .arg(channel)
                    .query_async::<Value>(&mut connection.clone())
                    .await?;
                Ok(())
            }
            Subscriber::Cluster(connection) => match command {
                "SSUBSCRIBE" => connection.clone().ssubscribe(channel).await,
                "SUNSUBSCRIBE" => connection.clone().sunsubscribe(channel).await,
                other => Err(redis::RedisError::from((
                    redis::ErrorKind::InvalidClientConfig,
                    "plain pub/sub is not used on a cluster",
                    other.to_owned(),
                ))),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_address_or_cluster_seeds() {
        assert_eq!(
            Target::parse("redis://127.0.0.1:6379", false)
                .unwrap()
                .servers,
            Servers::Single("redis://127.0.0.1:6379".into())
        );
        let seeds = Target::parse("redis://a:7000, redis://b:7001", true).unwrap();
        assert_eq!(
            seeds.servers,
            Servers::Cluster(vec!["redis://a:7000".into(), "redis://b:7001".into()])
        );
        assert_eq!(seeds.deadline, DEFAULT_DEADLINE);
        assert_eq!(
            seeds.clone().with_deadline(Duration::ZERO).deadline,
            Duration::from_millis(1)
        );
        assert!(seeds.is_cluster());
        assert_eq!(seeds.own_publish_command(), "SPUBLISH");
        // One seed is a cluster too.
        assert!(Target::parse("redis://a:7000", true).unwrap().is_cluster());
        assert!(matches!(
            Target::parse("redis://a:7000,redis://b:7001", false),
            Err(PubSubError::SeedsWithoutCluster(2))
        ));
        for bad in ["http://a:1", "redis://a:1,", "", "redis://a:1,tcp://b:2"] {
            assert!(
                matches!(
                    Target::parse(bad, true),
                    Err(PubSubError::UnsupportedUrl(_))
                ),
                "{bad:?}"
            );
        }
    }
}
