-- What each of a fairy's recent requests changed (its ledger, docs/storage.md "Fairy state"),
-- a row per request keyed `FAIRY/NUMBER`, so that a fairy's state is saved incrementally: the
-- state row holds the rest and the numbers of these rows, and a request's end writes only the
-- rows that changed. States saved before keep their whole ledger inline and still load.
CREATE TABLE IF NOT EXISTS fairy_requests (
    room TEXT NOT NULL,
    request TEXT NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (room, request)
) WITHOUT ROWID;
