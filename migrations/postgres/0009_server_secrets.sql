-- Secrets the server keeps across restarts (docs/auth.md "Development mode"): `--dev`'s HS256
-- secret, made once and reused by every node and restart sharing the store, so dev tokens stay
-- valid when a server restarts. Never logged, never served.
CREATE TABLE server_secrets (
    name TEXT PRIMARY KEY,
    value BYTEA NOT NULL
);
