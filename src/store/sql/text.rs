//! The SQL texts of the rooms' logs and the server's secrets, written once for both dialects:
//! SQLite and PostgreSQL take the same texts (`$N` placeholders, which SQLite numbers as
//! PostgreSQL does; unqualified table names: PostgreSQL finds them through the connection's
//! `search_path`, the `--store-schema`). Owns only these texts; the few that differ are the
//! dialects' ([`super::dialect::Dialect`]), the group-commit appends are each backend's own
//! (`store::sqlite`, `store::postgres`), and the keyed side tables' SQL is
//! [`crate::store::keyed::sql`].

/// Keeps a server secret (`$1` its name, `$2` the value) unless one of that name is kept.
pub(crate) const KEEP_SECRET: &str =
    "INSERT INTO server_secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING";

/// The kept server secret named `$1`: `value`.
pub(crate) const SECRET: &str = "SELECT value FROM server_secrets WHERE name = $1";

/// The name under which `--dev`'s HS256 secret is kept.
pub(crate) const DEV_SECRET_NAME: &str = "dev-jwt-hs256";

/// A room's snapshot: `seq`, `data`.
pub(crate) const SNAPSHOT: &str = "SELECT seq, data FROM snapshots WHERE room = $1";

/// A room's snapshot if it covers no more than `$2`.
pub(crate) const SNAPSHOT_AT_MOST: &str =
    "SELECT seq, data FROM snapshots WHERE room = $1 AND seq <= $2";

/// A room's updates after `$2`, oldest first: `seq`, `data`.
pub(crate) const UPDATES_AFTER: &str =
    "SELECT seq, data FROM updates WHERE room = $1 AND seq > $2 ORDER BY seq";

/// A room's updates after `$2` up to `$3`, oldest first: `seq`, `data`.
pub(crate) const UPDATES_BETWEEN: &str =
    "SELECT seq, data FROM updates WHERE room = $1 AND seq > $2 AND seq <= $3 ORDER BY seq";

/// Up to `$3` updates after `$2` with their time and actor: `seq`, `at`, actor JSON, `data`.
pub(crate) const HISTORY: &str =
    "SELECT u.seq, u.at, a.data, u.data FROM updates u LEFT JOIN actors a ON a.id = u.actor
     WHERE u.room = $1 AND u.seq > $2 ORDER BY u.seq LIMIT $3";

/// The last update logged at or before time `$2`.
pub(crate) const SEQ_AT: &str = "SELECT MAX(seq) FROM updates WHERE room = $1 AND at <= $2";

/// The sequence number of a room's newest checkpoint.
pub(crate) const NEWEST_CHECKPOINT: &str = "SELECT MAX(seq) FROM checkpoints WHERE room = $1";

/// `(seq, base)` of a room's checkpoints at or below `$2`.
pub(crate) const CHECKPOINT_META: &str =
    "SELECT seq, base FROM checkpoints WHERE room = $1 AND seq <= $2";

/// Every room with checkpoints (the rooms history pruning looks at).
pub(crate) const ROOMS_WITH_CHECKPOINTS: &str = "SELECT DISTINCT room FROM checkpoints";

/// What pruning before time `$2` keeps to: the room's last update older than `$2` (or of no
/// known time), and its snapshot's sequence number.
pub(crate) const PRUNE_BOUNDS: &str =
    "SELECT (SELECT MAX(seq) FROM updates WHERE room = $1 AND (at IS NULL OR at < $2)),
            (SELECT seq FROM snapshots WHERE room = $1)";

/// Makes checkpoint `$3` of room `$2` the full state `$1`.
pub(crate) const SQUASH_CHECKPOINT: &str =
    "UPDATE checkpoints SET data = $1, base = NULL WHERE room = $2 AND seq = $3";

/// Drops a room's updates up to `$2`.
pub(crate) const PRUNE_UPDATES: &str = "DELETE FROM updates WHERE room = $1 AND seq <= $2";

/// Drops a room's checkpoints below `$2`.
pub(crate) const PRUNE_CHECKPOINTS: &str = "DELETE FROM checkpoints WHERE room = $1 AND seq < $2";

/// Keeps a history checkpoint (`$1` room, `$2` seq, `$3` base, `$4` data) unless the room has
/// one newer than the state it extends (`$5`) or one at `$2` already.
pub(crate) const ADD_CHECKPOINT: &str = "INSERT INTO checkpoints (room, seq, base, data)
     SELECT $1, $2, $3, $4 WHERE NOT EXISTS (
         SELECT 1 FROM checkpoints WHERE room = $1 AND (seq > $5 OR seq >= $2))
     ON CONFLICT (room, seq) DO NOTHING";

/// A room's checkpoints from `$2` to `$3`, oldest first: `seq`, `data`.
pub(crate) const CHECKPOINTS_BETWEEN: &str =
    "SELECT seq, data FROM checkpoints WHERE room = $1 AND seq >= $2 AND seq <= $3 ORDER BY seq";

/// Adds an actor's JSON unless present.
pub(crate) const ADD_ACTOR: &str =
    "INSERT INTO actors (data) VALUES ($1) ON CONFLICT (data) DO NOTHING";

/// The number of an actor's JSON.
pub(crate) const ACTOR_ID: &str = "SELECT id FROM actors WHERE data = $1";

/// The sizes of up to `$3` updates after `$2`, oldest first: `seq`, bytes (read from the
/// record, not the blob: history batches are cut by bytes before their rows are read).
pub(crate) const LOG_SIZES: &str = "SELECT seq, CAST(LENGTH(data) AS BIGINT) FROM updates WHERE room = $1 AND seq > $2 ORDER BY seq LIMIT $3";

/// The updates after `$2` up to `$3` with their time and actor: `seq`, `at`, actor JSON, `data`.
pub(crate) const HISTORY_BETWEEN: &str =
    "SELECT u.seq, u.at, a.data, u.data FROM updates u LEFT JOIN actors a ON a.id = u.actor
     WHERE u.room = $1 AND u.seq > $2 AND u.seq <= $3 ORDER BY u.seq";

/// A room's oldest kept update.
pub(crate) const FIRST_KEPT: &str = "SELECT MIN(seq) FROM updates WHERE room = $1";

/// A room's last update: the log's, else its snapshot's.
pub(crate) const LAST_SEQ: &str = "SELECT MAX(s) FROM (
     SELECT MAX(seq) AS s FROM updates WHERE room = $1
     UNION ALL SELECT seq AS s FROM snapshots WHERE room = $1) AS t";

/// Every room's log bytes over `$1`: `room`.
pub(crate) const LOGS_OVER: &str =
    "SELECT room FROM updates GROUP BY room HAVING SUM(LENGTH(data)) > $1";

/// The newest update of room `$1` from which on the log holds more than `$2` bytes (it and
/// everything before it must go for the rest to fit).
pub(crate) const LOG_CUT: &str = "SELECT MAX(seq) FROM (
     SELECT seq, SUM(LENGTH(data)) OVER (ORDER BY seq DESC) AS tail
     FROM updates WHERE room = $1) AS t WHERE tail > $2";

/// A room's snapshot's sequence number.
pub(crate) const SNAPSHOT_SEQ: &str = "SELECT seq FROM snapshots WHERE room = $1";
