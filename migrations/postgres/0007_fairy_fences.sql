-- Fencing tokens of fairies' hostings (docs/scaling.md "Fencing"): the newest generation of each
-- fairy's hosting, taken by the node that took its lease; an append carrying an older one is
-- refused.
CREATE TABLE fairy_fences (
    room TEXT NOT NULL,
    fairy TEXT NOT NULL,
    generation BIGINT NOT NULL,
    PRIMARY KEY (room, fairy)
);
