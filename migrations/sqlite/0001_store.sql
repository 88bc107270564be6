-- fairyring's SQLite store (docs/storage.md, "Layout of the store"): the schema as it stood
-- when migrations were introduced. Every statement is IF NOT EXISTS: a database made by an
-- earlier version (tables created in code, no _sqlx_migrations) converges here, its tables and
-- rows kept, the tables it lacks created. The columns such a database may lack (updates.at,
-- updates.actor, checkpoints.base) are added by the store's code before the migrations run
-- (sqlite.rs, ADDED_COLUMNS), so that every later migration finds this exact schema.

-- The room log: each room's updates with their time and actor.
CREATE TABLE IF NOT EXISTS updates (
    room TEXT NOT NULL,
    seq INTEGER NOT NULL,
    data BLOB NOT NULL,
    at INTEGER,
    actor INTEGER,
    PRIMARY KEY (room, seq)
) WITHOUT ROWID;

-- The state a room loads from, covering its log up to seq.
CREATE TABLE IF NOT EXISTS snapshots (
    room TEXT PRIMARY KEY NOT NULL,
    seq INTEGER NOT NULL,
    data BLOB NOT NULL
);

-- Each distinct actor (its JSON) once; updates name it by number.
CREATE TABLE IF NOT EXISTS actors (
    id INTEGER PRIMARY KEY,
    data TEXT NOT NULL UNIQUE
);

-- History checkpoints, a chain of deltas (base: the checkpoint it extends; NULL: a full state).
CREATE TABLE IF NOT EXISTS checkpoints (
    room TEXT NOT NULL,
    seq INTEGER NOT NULL,
    data BLOB NOT NULL,
    base INTEGER,
    PRIMARY KEY (room, seq)
) WITHOUT ROWID;

-- Keyed side tables: each fairy's private state, each room's projects, each room's
-- instructions for its fairies.
CREATE TABLE IF NOT EXISTS fairy_states (
    room TEXT NOT NULL,
    fairy TEXT NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (room, fairy)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS projects (
    room TEXT NOT NULL,
    project TEXT NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (room, project)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS room_instructions (
    room TEXT PRIMARY KEY NOT NULL,
    text TEXT NOT NULL
);

-- The webhook outbox (docs/webhooks.md).
CREATE TABLE IF NOT EXISTS webhook_outbox (
    id TEXT PRIMARY KEY NOT NULL,
    body BLOB NOT NULL,
    created_at INTEGER NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_at INTEGER NOT NULL,
    claimed_until INTEGER NOT NULL DEFAULT 0,
    dead_at INTEGER,
    last_error TEXT
);

CREATE INDEX IF NOT EXISTS webhook_outbox_due ON webhook_outbox (next_at)
    WHERE dead_at IS NULL;
