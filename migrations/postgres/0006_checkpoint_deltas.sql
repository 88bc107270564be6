-- History checkpoints as a chain of deltas (docs/storage.md "History"): a checkpoint with a
-- `base` holds only what the room gained since the checkpoint at `base`; one without is a full
-- state (every checkpoint written before this migration).
ALTER TABLE checkpoints ADD COLUMN base BIGINT;
