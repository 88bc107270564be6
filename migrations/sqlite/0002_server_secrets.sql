-- Secrets the server keeps across restarts (docs/auth.md "Development mode"): `--dev`'s HS256
-- secret, made once and reused, so dev tokens stay valid when the server restarts on the same
-- store. Never logged, never served.
CREATE TABLE IF NOT EXISTS server_secrets (
    name TEXT PRIMARY KEY NOT NULL,
    value BLOB NOT NULL
);
