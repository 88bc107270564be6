//! Fairy leases in Redis (docs/scaling.md "Fairies across nodes"): which node hosts each fairy.
//!
//! One key per fairy, `PREFIX:lease:ROOM:FAIRY`, holding `NODE ADDR CLIENT` (the host's node id,
//! the HTTP address other nodes forward the fairy's API calls to, and the fairy's awareness
//! client id there), taken with `SET NX PX` and renewed or released only by its holder (a
//! compare-and-set in a Lua script, so a node never extends or deletes another node's lease).
//! Redis enforces the expiry with its own clock: no clock of the nodes is compared. A second
//! key, `PREFIX:lease-last:ROOM:FAIRY`, remembers the last holder, so that a node taking a lease
//! knows whether the fairy moved (`fairyring_fairy_lease_moves_total`). On a Redis Cluster the
//! two keys carry a hash tag, `PREFIX:lease:{ROOM:FAIRY}` and `PREFIX:lease-last:{ROOM:FAIRY}`,
//! so that they share a slot: the scripts touching both run on one shard (a script's keys
//! must), and the fairies' leases spread over the shards.
//!
//! Owns the keys and their scripts only: when to take, renew or give up a lease is the fairy
//! hub's business (`crate::agent::host::hub`), and it knows nothing of fairies beyond their names.

use std::time::Duration;

use super::target::Commands;
use super::{NodeId, Prefix, PubSubError};
use crate::ids::RoomName;

/// How long a lease lives without renewal: a dead host's fairies move after at most this.
pub const LEASE_TTL: Duration = Duration::from_secs(6);
/// How often the holder renews its leases.
pub const LEASE_RENEW: Duration = Duration::from_millis(1500);
/// How long the last-holder record is kept.
const LAST_HOLDER_TTL: Duration = Duration::from_secs(24 * 3600);

/// Takes the lease if free; returns 0 (held by someone), 1 (taken), 2 (taken from another node).
const ACQUIRE: &str = r"
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local last = redis.call('GET', KEYS[2])
  redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[4])
  if last and last ~= ARGV[3] then return 2 end
  return 1
end
return 0";
/// Extends the lease if still this holder's; 1 if so, 0 otherwise.
const RENEW: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0";
/// Deletes the lease if still this holder's (and, when asked, the last-holder record).
const RELEASE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  if ARGV[2] == '1' then redis.call('DEL', KEYS[2]) end
  return 1
end
return 0";

/// What taking a lease gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Taken {
    /// Another node holds it.
    Held,
    /// This node holds it now (nobody held it before, or this node did).
    Fresh,
    /// This node holds it now, and another node held it last: the fairy moved.
    Moved,
}

/// The node hosting a fairy, as its lease says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// The host's node id.
    pub node: String,
    /// The host's HTTP address (`HOST:PORT`).
    pub addr: String,
    /// The fairy's awareness client id there.
    pub client_id: u64,
}

impl Holder {
    fn encode(&self) -> String {
        format!("{} {} {}", self.node, self.addr, self.client_id)
    }

    fn decode(text: &str) -> Option<Holder> {
        let mut parts = text.split(' ');
        let (node, addr, client) = (parts.next()?, parts.next()?, parts.next()?);
        Some(Holder {
            node: node.to_owned(),
            addr: addr.to_owned(),
            client_id: client.parse().ok()?,
        })
    }
}

/// This node's handle on the fairy leases of its deployment.
#[derive(Clone)]
pub struct RedisLeases {
    connection: Commands,
    prefix: Prefix,
    node: NodeId,
    addr: String,
}

/// The lease key and the last-holder key of `fairy` in `room`; with a hash tag (`{ROOM:FAIRY}`,
/// which prefixes, room names and fairy ids, all without braces, never cut short) when `tagged`.
fn lease_keys(prefix: &Prefix, room: &RoomName, fairy: &str, tagged: bool) -> (String, String) {
    let (prefix, room) = (prefix.as_str(), room.as_str());
    if tagged {
        (
            format!("{prefix}:lease:{{{room}:{fairy}}}"),
            format!("{prefix}:lease-last:{{{room}:{fairy}}}"),
        )
    } else {
        (
            format!("{prefix}:lease:{room}:{fairy}"),
            format!("{prefix}:lease-last:{room}:{fairy}"),
        )
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

impl RedisLeases {
    /// Leases taken by `node`, reachable at `addr`, over `connection`.
    pub fn new(connection: Commands, prefix: Prefix, node: NodeId, addr: String) -> Self {
        RedisLeases {
            connection,
            prefix,
            node,
            addr,
        }
    }

    /// This node's id as leases name it.
    pub fn node(&self) -> String {
        self.node.to_string()
    }

    fn keys(&self, room: &RoomName, fairy: &str) -> (String, String) {
        lease_keys(
            &self.prefix,
            room,
            fairy,
            matches!(self.connection, Commands::Cluster(_)),
        )
    }

    fn mine(&self, client_id: u64) -> String {
        Holder {
            node: self.node(),
            addr: self.addr.clone(),
            client_id,
        }
        .encode()
    }

    /// Runs one of the lease scripts.
    async fn eval(&self, script: &str, keys: &[&str], args: &[String]) -> Result<i64, PubSubError> {
        let mut command = redis::cmd("EVAL");
        command.arg(script).arg(keys.len()).arg(keys).arg(args);
        Ok(command.query_async(&mut self.connection.clone()).await?)
    }

    /// Takes the lease of `fairy` for this node, if nobody holds it.
    pub async fn acquire(
        &self,
        room: &RoomName,
        fairy: &str,
        client_id: u64,
    ) -> Result<Taken, PubSubError> {
        let (key, last) = self.keys(room, fairy);
        let args = [
            self.mine(client_id),
            millis(LEASE_TTL).to_string(),
            self.node(),
            millis(LAST_HOLDER_TTL).to_string(),
        ];
        Ok(match self.eval(ACQUIRE, &[&key, &last], &args).await? {
            0 => Taken::Held,
            2 => Taken::Moved,
            _ => Taken::Fresh,
        })
    }

    /// Extends this node's lease of `fairy`; `false` when it is not this node's any more.
    pub async fn renew(
        &self,
        room: &RoomName,
        fairy: &str,
        client_id: u64,
    ) -> Result<bool, PubSubError> {
        let (key, _) = self.keys(room, fairy);
        let args = [self.mine(client_id), millis(LEASE_TTL).to_string()];
        Ok(self.eval(RENEW, &[&key], &args).await? == 1)
    }

    /// Gives this node's lease of `fairy` up (`forget`: the fairy is gone, its record too).
    pub async fn release(
        &self,
        room: &RoomName,
        fairy: &str,
        client_id: u64,
        forget: bool,
    ) -> Result<(), PubSubError> {
        let (key, last) = self.keys(room, fairy);
        let args = [self.mine(client_id), u8::from(forget).to_string()];
        self.eval(RELEASE, &[&key, &last], &args).await?;
        Ok(())
    }

    /// The node holding the lease of `fairy`, if any.
    pub async fn holder(
        &self,
        room: &RoomName,
        fairy: &str,
    ) -> Result<Option<Holder>, PubSubError> {
        let (key, _) = self.keys(room, fairy);
        let value: Option<String> = redis::cmd("GET")
            .arg(&key)
            .query_async(&mut self.connection.clone())
            .await?;
        Ok(value.as_deref().and_then(Holder::decode))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fairys_two_keys_share_a_slot_on_a_cluster() {
        use redis::cluster_routing::Slot;
        let prefix = Prefix::parse("dep").unwrap();
        let room = RoomName::parse("r.1").unwrap();
        let (lease, last) = lease_keys(&prefix, &room, "fairy-1", true);
        assert_eq!(lease, "dep:lease:{r.1:fairy-1}");
        assert_eq!(Slot::for_key(&lease), Slot::for_key(&last));
        // Another fairy of the room may live on another shard.
        let (other, _) = lease_keys(&prefix, &room, "fairy-2", true);
        assert_ne!(Slot::for_key(&lease), Slot::for_key(&other));
        // One Redis: the keys as they always were.
        assert_eq!(
            lease_keys(&prefix, &room, "fairy-1", false),
            (
                "dep:lease:r.1:fairy-1".into(),
                "dep:lease-last:r.1:fairy-1".into()
            )
        );
    }

    #[test]
    fn holders_round_trip_and_reject_garbage() {
        let holder = Holder {
            node: "00000000000000ff".into(),
            addr: "127.0.0.1:8081".into(),
            client_id: 1 << 45,
        };
        assert_eq!(Holder::decode(&holder.encode()), Some(holder));
        for bad in ["", "node", "node addr", "node addr notanumber"] {
            assert_eq!(Holder::decode(bad), None, "{bad:?}");
        }
    }
}
