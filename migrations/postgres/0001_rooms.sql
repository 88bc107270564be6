-- fairyring's PostgreSQL store (docs/storage.md, "PostgreSQL"). Every table lives in the
-- schema named by --store-schema (the connection's search_path), so deployments and tests can
-- share one database.

-- One row per room: the sequence counter of its update log. Appends lock this row, so the
-- sequence numbers of a room are handed out without gaps and become visible in order, whichever
-- node appends.
CREATE TABLE rooms (
    room TEXT PRIMARY KEY,
    last_seq BIGINT NOT NULL
);

CREATE TABLE updates (
    room TEXT NOT NULL,
    seq BIGINT NOT NULL,
    data BYTEA NOT NULL,
    PRIMARY KEY (room, seq)
);

CREATE TABLE snapshots (
    room TEXT PRIMARY KEY,
    seq BIGINT NOT NULL,
    data BYTEA NOT NULL
);

CREATE TABLE fairy_states (
    room TEXT NOT NULL,
    fairy TEXT NOT NULL,
    data BYTEA NOT NULL,
    PRIMARY KEY (room, fairy)
);
