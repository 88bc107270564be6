-- History (docs/storage.md, "History"): every logged update keeps its time and its actor, and
-- compaction keeps full states as checkpoints instead of deleting the log. Rows logged before
-- this migration have neither a time nor a known actor.
ALTER TABLE updates ADD COLUMN at BIGINT;
ALTER TABLE updates ADD COLUMN actor BIGINT;

-- Each distinct actor (its JSON) once; updates name it by number.
CREATE TABLE actors (
    id BIGSERIAL PRIMARY KEY,
    data TEXT NOT NULL UNIQUE
);

-- Full states of a room kept for history, every --history-checkpoint-every updates or more.
CREATE TABLE checkpoints (
    room TEXT NOT NULL,
    seq BIGINT NOT NULL,
    data BYTEA NOT NULL,
    PRIMARY KEY (room, seq)
);
