//! Server configuration: one struct, parsed from CLI flags with `FAIRYRING_*` environment
//! fallbacks (clap derive), with [`ServeConfig::for_test`] for tests.
//!
//! This module owns the names and defaults of every `serve` flag; it does not validate
//! cross-flag policy (the server does that at start-up) and performs no I/O.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum LogFormat {
    /// Human-readable, coloured when stderr is a terminal.
    #[default]
    Pretty,
    /// One JSON object per line, for log shippers.
    Json,
}

/// How the server's background threads (the fairies' workers, the snapshot thread) are
/// lowered below the threads that serve people ([`crate::priority`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum BackgroundPriority {
    /// The scheduler's idle class: background threads run only on cycles nothing else wants.
    #[default]
    Idle,
    /// Niceness 10: background threads still get about a tenth of a busy core.
    Nice,
}

/// Which language-model provider fairies think with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum LlmProvider {
    /// The embedded offline model: no network, no key (the default, for demos and tests).
    #[default]
    Offline,
    /// Anthropic Messages API (key from `ANTHROPIC_API_KEY`, comma-separated for several profiles).
    Anthropic,
    /// Any OpenAI-compatible chat-completions endpoint (OpenAI, Ollama, llama.cpp, vLLM).
    Openai,
}

/// Whether fairy requests carry a screenshot of their bounds (docs/fairies.md "What a fairy sees").
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum LlmVision {
    /// Only to models known to take images ([`crate::llm::vision::accepts_images`]).
    #[default]
    Auto,
    /// Always (for a model `auto` does not know).
    On,
    /// Never.
    Off,
}

/// How long Anthropic keeps the prompt prefixes a fairy's calls write to its cache
/// (docs/llm.md "Prompt caching").
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum LlmCacheTtl {
    /// Five minutes (the default; a cache write costs 1.25 × input).
    #[default]
    #[value(name = "5m")]
    FiveMinutes,
    /// One hour, for rooms whose fairies come back within the hour (a write costs 2 × input).
    #[value(name = "1h")]
    OneHour,
}

/// How a fairy's private state is laid out in the store (docs/storage.md "Fairy state";
/// docs/operations.md "Upgrades").
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum FairyStateLayout {
    /// A row for the state and one per recent request, written incrementally (the default).
    #[default]
    Rows,
    /// The whole state in one row, its requests inline: the layout of releases before the
    /// rows, which nodes of those releases read completely. For the nodes of a rolling upgrade
    /// from such a release, until every node runs this one.
    Whole,
}

/// Whether model providers are asked for structured output: OpenAI-compatible servers a
/// `response_format` JSON schema, Anthropic a tool whose input is the actions list
/// (docs/llm.md "Structured output").
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum LlmStructured {
    /// Ask; a provider that refuses it is answered with the prompt's schema alone from then
    /// on (a logged note).
    #[default]
    Auto,
    /// Ask; a refusal is an error (to check that a provider constrains its output).
    On,
    /// Never ask: the schema is in the prompt only.
    Off,
}

/// JWT signature algorithm; fixed by configuration, never read from a token's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum JwtAlg {
    /// HMAC-SHA256 with `--jwt-secret`.
    #[default]
    #[value(name = "HS256")]
    Hs256,
    /// RSA PKCS#1 v1.5 SHA-256 with `--jwt-public-key`.
    #[value(name = "RS256")]
    Rs256,
    /// ECDSA P-256 SHA-256 with `--jwt-public-key`.
    #[value(name = "ES256")]
    Es256,
    /// Ed25519 with `--jwt-public-key`.
    #[value(name = "EdDSA")]
    EdDsa,
}

/// Flags of `fairyring serve`.
#[derive(Debug, Clone, Args)]
pub struct ServeConfig {
    /// Address to listen on (use port 0 for any free port).
    #[arg(long, env = "FAIRYRING_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,

    /// Document store: `sqlite:PATH` (embedded default), `memory:` (nothing kept),
    /// or `postgres://…`.
    #[arg(long, env = "FAIRYRING_STORE", default_value = "sqlite:fairyring.db")]
    pub store: String,

    /// PostgreSQL schema holding this deployment's tables (created if missing), so several
    /// deployments or tests can share one database. Default `fairyring`.
    #[arg(long, env = "FAIRYRING_STORE_SCHEMA")]
    pub store_schema: Option<String>,

    /// Deadline of every store call, in milliseconds: a call that does not answer in time (a
    /// stalled database or network) fails as if the store were down — the room's sockets close
    /// with 1011, REST writes answer 503 — instead of hanging the room.
    #[arg(long, env = "FAIRYRING_STORE_TIMEOUT_MS", default_value_t = 5000)]
    pub store_timeout_ms: u64,

    /// Pub/sub between the nodes of a scale-out deployment: `redis://HOST:PORT`. Every node
    /// shares the same PostgreSQL `--store`; any node serves any room. With
    /// `--pubsub-cluster`, one or more comma-separated seed addresses of a Redis Cluster.
    #[arg(long, env = "FAIRYRING_PUBSUB")]
    pub pubsub: Option<String>,

    /// `--pubsub` is a Redis Cluster (Redis 7 or later), given by the addresses of one or more
    /// of its nodes (`redis://HOST:PORT,redis://HOST:PORT`; the rest are discovered). Room
    /// channels, the nodes channel and each node's own channel are then sharded
    /// (`SSUBSCRIBE`/`SPUBLISH`, implying `--pubsub-sharded`), fairy leases spread over the
    /// shards. Every node of a deployment must use the same setting.
    #[arg(long, env = "FAIRYRING_PUBSUB_CLUSTER")]
    pub pubsub_cluster: bool,

    /// Prefix of this deployment's Redis channels (`[A-Za-z0-9._-]`); defaults to the store
    /// schema, else `fairyring`.
    #[arg(long, env = "FAIRYRING_PUBSUB_PREFIX")]
    pub pubsub_prefix: Option<String>,

    /// Deadline of every Redis call, in milliseconds: a command's answer and a connection's
    /// handshake. A Redis that stalls without closing fails the call; rooms then catch up from
    /// the store.
    #[arg(long, env = "FAIRYRING_PUBSUB_TIMEOUT_MS", default_value_t = 500)]
    pub pubsub_timeout_ms: u64,

    /// Carry room messages over sharded pub/sub (`SSUBSCRIBE`/`SPUBLISH`, Redis 7 or later)
    /// instead of `SUBSCRIBE`/`PUBLISH`: in a Redis Cluster a room's messages then stay on the
    /// shard that owns its channel. Every node of a deployment must use the same setting.
    /// Implied by `--pubsub-cluster`.
    #[arg(long, env = "FAIRYRING_PUBSUB_SHARDED")]
    pub pubsub_sharded: bool,

    /// Scaled out: `HOST:PORT` the other nodes reach this one at over HTTP, to forward the
    /// API calls of the fairies it hosts; defaults to the bound `--listen` address.
    #[arg(long, env = "FAIRYRING_ADVERTISE")]
    pub advertise: Option<String>,

    /// HS256 shared secret for verifying (and, with `token`, minting) JWTs.
    #[arg(long, env = "FAIRYRING_JWT_SECRET", hide_env_values = true)]
    pub jwt_secret: Option<String>,

    /// PEM public key file for RS256 / ES256 / EdDSA tokens (with `--jwt-alg`).
    #[arg(long, env = "FAIRYRING_JWT_PUBLIC_KEY")]
    pub jwt_public_key: Option<PathBuf>,

    /// JWT algorithm accepted by the server.
    #[arg(long, env = "FAIRYRING_JWT_ALG", value_enum, default_value = "HS256")]
    pub jwt_alg: JwtAlg,

    /// Required `iss` claim, checked when set.
    #[arg(long, env = "FAIRYRING_JWT_ISSUER")]
    pub jwt_issuer: Option<String>,

    /// Required `aud` claim, checked when set.
    #[arg(long, env = "FAIRYRING_JWT_AUDIENCE")]
    pub jwt_audience: Option<String>,

    /// Clock leeway in seconds for `exp` and `nbf`.
    #[arg(long, env = "FAIRYRING_JWT_LEEWAY", default_value_t = 5)]
    pub jwt_leeway: u64,

    /// Serve without authentication when no JWT key is configured: anyone may read and write
    /// every room. For local experiments only; ignored when a secret or public key is set.
    #[arg(long, env = "FAIRYRING_INSECURE_NO_AUTH")]
    pub insecure_no_auth: bool,

    /// Development mode: enables `POST /auth/dev-token` (anyone can get a token). Never in production.
    #[arg(long, env = "FAIRYRING_DEV")]
    pub dev: bool,

    /// Seconds a room stays loaded with no connection and no working fairy before it is
    /// flushed and unloaded.
    #[arg(long, env = "FAIRYRING_IDLE_UNLOAD", default_value_t = 30)]
    pub idle_unload: u64,

    /// Largest WebSocket message accepted, in bytes (larger: close 1009).
    #[arg(long, env = "FAIRYRING_MAX_MESSAGE_BYTES", default_value_t = 1024 * 1024)]
    pub max_message_bytes: usize,

    /// Most simultaneous connections to one room (more: 503 before the upgrade).
    #[arg(
        long,
        env = "FAIRYRING_MAX_CONNECTIONS_PER_ROOM",
        default_value_t = 512
    )]
    pub max_connections_per_room: usize,

    /// Most simultaneous WebSocket connections in the process.
    #[arg(long, env = "FAIRYRING_MAX_CONNECTIONS", default_value_t = 10_000)]
    pub max_connections: usize,

    /// Most rooms loaded at once.
    #[arg(long, env = "FAIRYRING_MAX_ROOMS", default_value_t = 10_000)]
    pub max_rooms: usize,

    /// Sustained messages per second allowed per connection (token bucket).
    #[arg(long, env = "FAIRYRING_RATE_PER_SEC", default_value_t = 200)]
    pub rate_per_sec: u32,

    /// Burst size of the per-connection token bucket.
    #[arg(long, env = "FAIRYRING_RATE_BURST", default_value_t = 1000)]
    pub rate_burst: u32,

    /// Sustained bytes per second a connection may send (read-only peers included), on top of
    /// the message rate; its burst is the larger of this and `--max-message-bytes`. Exceeding
    /// it closes with 1008.
    #[arg(long, env = "FAIRYRING_RATE_BYTES_PER_SEC", default_value_t = 1024 * 1024)]
    pub rate_bytes_per_sec: u32,

    /// Largest awareness state one client may hold, in bytes of its JSON (larger: close 1009).
    #[arg(long, env = "FAIRYRING_MAX_AWARENESS_BYTES", default_value_t = 16 * 1024)]
    pub max_awareness_bytes: usize,

    /// Largest encoded document a room may hold, in bytes: an update (from a peer, a fairy,
    /// the REST API or a restore) that would take it past this is refused and the room stays as
    /// it was (a peer's socket closes with 1009, the API answers 413). See docs/protocol.md
    /// "Document size".
    #[arg(long, env = "FAIRYRING_MAX_DOC_BYTES", default_value_t = 64 * 1024 * 1024)]
    pub max_doc_bytes: u64,

    /// Most HTTP requests in flight in the process, from arrival until their answer is sent
    /// (WebSocket upgrades apart); over it `503 server_busy`. 0: no cap. See docs/limits.md
    /// "HTTP".
    #[arg(long, env = "FAIRYRING_MAX_HTTP_REQUESTS", default_value_t = 256)]
    pub max_http_requests: usize,

    /// Most HTTP requests of one token in flight at once; over it `429 too_many_requests`.
    /// 0: no cap.
    #[arg(
        long,
        env = "FAIRYRING_MAX_HTTP_REQUESTS_PER_TOKEN",
        default_value_t = 16
    )]
    pub max_http_requests_per_token: usize,

    /// Seconds a connection's write may make no progress (its client reads nothing) before the
    /// connection is dropped, with the answer it held and its place under
    /// `--max-http-requests`. 0: no timeout. See docs/limits.md "HTTP".
    #[arg(long, env = "FAIRYRING_HTTP_WRITE_TIMEOUT", default_value_t = 30)]
    pub http_write_timeout: u64,

    /// Outbound frames queued per peer before that peer is closed as too slow.
    #[arg(long, env = "FAIRYRING_OUTBOUND_QUEUE", default_value_t = 1024)]
    pub outbound_queue: usize,

    /// Microseconds per peer between the starts of two of a busy room's commits (each commit
    /// is one frame to every peer; busy: at its rate of the last 100 ms, 3 or more updates
    /// fall in that gap): what arrives meanwhile is committed and sent together. A busy room
    /// of 40 peers then sends at most every 2 ms, of 100 or more every 5 ms (the cap); a
    /// slower room holds nothing. 0: commit as soon as the committer is free. See
    /// docs/limits.md.
    #[arg(long, env = "FAIRYRING_COALESCE_US_PER_PEER", default_value_t = 50)]
    pub coalesce_us_per_peer: u64,

    /// Compact a room's update log into a snapshot after this many logged updates.
    #[arg(long, env = "FAIRYRING_COMPACT_EVERY", default_value_t = 500)]
    pub compact_every: u64,

    /// Take a history checkpoint of a room every this many updates, in the background (a delta
    /// on the one before); a version materialises from the nearest one. 0: no checkpoints
    /// (versions then materialise from the room's first update while the log keeps it).
    #[arg(
        long,
        env = "FAIRYRING_HISTORY_CHECKPOINT_EVERY",
        default_value_t = 2000
    )]
    pub history_checkpoint_every: u64,

    /// How long history is kept: `30d`, `12h`, `90m`, `3600s` (a plain number is seconds);
    /// `0` keeps everything. Older updates and checkpoints are dropped in the background.
    #[arg(long, env = "FAIRYRING_HISTORY_RETENTION", default_value = "30d")]
    pub history_retention: Retention,

    /// Most bytes of updates a room's kept log holds (0: no cap): past it the oldest updates
    /// are dropped in the background (checked every minute), down to a checkpoint taken at the
    /// cut, so every later moment stays readable. See docs/history.md "What is kept".
    #[arg(
        long,
        env = "FAIRYRING_HISTORY_MAX_BYTES",
        default_value_t = 512 * 1024 * 1024
    )]
    pub history_max_bytes: u64,

    /// Log format.
    #[arg(
        long,
        env = "FAIRYRING_LOG_FORMAT",
        value_enum,
        default_value = "pretty"
    )]
    pub log_format: LogFormat,

    /// Language-model provider for fairies.
    #[arg(long, env = "FAIRYRING_LLM", value_enum, default_value = "offline")]
    pub llm: LlmProvider,

    /// Model name sent to the provider (provider default when unset).
    #[arg(long, env = "FAIRYRING_LLM_MODEL")]
    pub llm_model: Option<String>,

    /// Provider base URL (e.g. `http://127.0.0.1:11434` for Ollama); provider default when unset.
    #[arg(long, env = "FAIRYRING_LLM_BASE_URL")]
    pub llm_base_url: Option<String>,

    /// Screenshots in fairy requests: `auto` (models known to take images), `on` or `off`.
    #[arg(long, env = "FAIRYRING_LLM_VISION", value_enum, default_value = "auto")]
    pub llm_vision: LlmVision,

    /// Seconds without a byte from the model before a request is treated as timed out.
    #[arg(long, env = "FAIRYRING_LLM_TIMEOUT", default_value_t = 60)]
    pub llm_timeout: u64,

    /// Seconds to wait for the model's first byte (a local model reads the whole prompt
    /// first: minutes on a CPU); `--llm-timeout` bounds the waits after it.
    #[arg(long, env = "FAIRYRING_LLM_FIRST_BYTE_TIMEOUT", default_value_t = 300)]
    pub llm_first_byte_timeout: u64,

    /// Lifetime of Anthropic prompt-cache entries: `5m` or `1h` (rooms whose fairies come back
    /// within the hour).
    #[arg(
        long,
        env = "FAIRYRING_LLM_CACHE_TTL",
        value_enum,
        default_value = "5m"
    )]
    pub llm_cache_ttl: LlmCacheTtl,

    /// Structured output: `auto` (ask, fall back to the prompt's schema where refused), `on`
    /// (ask; a refusal is an error) or `off`.
    #[arg(
        long,
        env = "FAIRYRING_LLM_STRUCTURED",
        value_enum,
        default_value = "auto"
    )]
    pub llm_structured: LlmStructured,

    /// Retries of a failed model request (on the next auth profile) before giving up.
    #[arg(long, env = "FAIRYRING_LLM_MAX_RETRIES", default_value_t = 4)]
    pub llm_max_retries: u32,

    /// Milliseconds to hold each piece of the model's streamed text (0: none). The offline
    /// model answers at once; a pace lets a demo watch a fairy draw shape by shape. Default: 0,
    /// except the offline model under `--dev`, which is paced at 30 ms (a house in about 1.9 s).
    #[arg(long, env = "FAIRYRING_LLM_PACE_MS")]
    pub llm_pace_ms: Option<u64>,

    /// Milliseconds between two tentative applications of one streaming fairy action
    /// (fewer applications, fewer tombstones in the document).
    #[arg(long, env = "FAIRYRING_FAIRY_APPLY_INTERVAL_MS", default_value_t = 250)]
    pub fairy_apply_interval_ms: u64,

    /// Geometry change in px that re-applies a streaming fairy action before the interval.
    #[arg(long, env = "FAIRYRING_FAIRY_APPLY_MIN_MOVE", default_value_t = 64.0)]
    pub fairy_apply_min_move: f64,

    /// Most model turns one fairy request may take.
    #[arg(long, env = "FAIRYRING_FAIRY_MAX_ITERATIONS", default_value_t = 25)]
    pub fairy_max_iterations: usize,

    /// Most complete actions one model turn may apply; the turn (and the request) ends there,
    /// the stream dropped. A normal turn applies a few dozen; 0 = no limit.
    #[arg(
        long,
        env = "FAIRYRING_FAIRY_TURN_MAX_ACTIONS",
        default_value_t = DEFAULT_FAIRY_TURN_MAX_ACTIONS
    )]
    pub fairy_turn_max_actions: usize,

    /// Most seconds one model turn may stream, counted from the model's first event (a slow
    /// prompt read is bounded by `--llm-first-byte-timeout`); the turn (and the request) ends
    /// there, the stream dropped. 0 = no limit.
    #[arg(
        long,
        env = "FAIRYRING_FAIRY_TURN_MAX_SECS",
        default_value_t = DEFAULT_FAIRY_TURN_MAX_SECS
    )]
    pub fairy_turn_max_secs: u64,

    /// How fairies' private states are written: `rows` (a row per recent request, saved
    /// incrementally) or `whole` (one row each, the layout nodes of the releases before read;
    /// for a rolling upgrade from them, docs/operations.md "Upgrades"). Both are read.
    #[arg(
        long,
        env = "FAIRYRING_FAIRY_STATE_LAYOUT",
        value_enum,
        default_value = "rows"
    )]
    pub fairy_state_layout: FairyStateLayout,

    /// Characters of chat history a fairy's prompt may carry; older items are summarised by
    /// the model (and cut if that fails) beyond it.
    #[arg(long, env = "FAIRYRING_FAIRY_HISTORY_CHARS", default_value_t = 100_000)]
    pub fairy_history_chars: usize,

    /// Most fairies in one room (another invitation: 409 `too_many_fairies`).
    #[arg(long, env = "FAIRYRING_MAX_FAIRIES_PER_ROOM", default_value_t = 16)]
    pub max_fairies_per_room: usize,

    /// Fairy API calls that start or stop work (invite, prompt, cancel, dismiss) allowed per
    /// minute per token `sub`, as a bucket of that size refilling over the minute (over it:
    /// 429 `rate_limited` with `retry-after`); 0 = no limit.
    #[arg(long, env = "FAIRYRING_FAIRY_API_RATE_PER_MIN", default_value_t = 60)]
    pub fairy_api_rate_per_min: u32,

    /// Model tokens (input + output + cache writes) the fairies of one room may use per hour,
    /// as a bucket of that size refilling over the hour; a request that finds it empty ends
    /// before its next model call. 0 = no limit.
    #[arg(
        long,
        env = "FAIRYRING_FAIRY_TOKEN_BUDGET",
        default_value_t = 1_000_000
    )]
    pub fairy_token_budget: u64,

    /// Model tokens one person (token `sub`) may have the fairies spend per day, in every room
    /// together (a bucket refilling over the day); a prompt that finds it spent is refused
    /// with 429 `budget_exhausted`. 0 = no limit.
    #[arg(long, env = "FAIRYRING_FAIRY_TOKEN_BUDGET_PERSON", default_value_t = 0)]
    pub fairy_token_budget_person: u64,

    /// Model tokens one fairy project may spend per day (a bucket refilling over the day).
    /// 0 = no limit.
    #[arg(
        long,
        env = "FAIRYRING_FAIRY_TOKEN_BUDGET_PROJECT",
        default_value_t = 0
    )]
    pub fairy_token_budget_project: u64,

    /// A TOML file of model prices (USD per million tokens of input, cached input, cache
    /// writes and output) added to the built-in ones; models without a price get no money
    /// figure.
    #[arg(long, env = "FAIRYRING_LLM_PRICES")]
    pub llm_prices: Option<std::path::PathBuf>,

    /// Shapes all the fairies of one room may change per second with their complete actions;
    /// over it their actions wait (applied later, whole, in order; still-streaming previews
    /// wait too), people's updates never do. 0 = no limit.
    #[arg(
        long,
        env = "FAIRYRING_FAIRY_WRITES_PER_SEC",
        default_value_t = DEFAULT_FAIRY_WRITES_PER_SEC
    )]
    pub fairy_writes_per_sec: u32,

    /// How the fairies' threads and the snapshot thread are lowered below people's: `idle`
    /// (they run only on spare cycles; people's updates take a core at once) or `nice`
    /// (niceness 10: they keep a tenth of a busy core, for machines whose other work keeps
    /// every core busy). Process-wide, set when the server starts.
    #[arg(
        long,
        env = "FAIRYRING_BACKGROUND_PRIORITY",
        value_enum,
        default_value = "idle"
    )]
    pub background_priority: BackgroundPriority,

    /// Wall-clock budget of one render (an export, a fairy's screenshot), in milliseconds: an
    /// export past it answers 503 `render_timeout`, a screenshot past it is left out of the
    /// fairy's request.
    #[arg(long, env = "FAIRYRING_RENDER_TIMEOUT_MS", default_value_t = 2000)]
    pub render_timeout_ms: u64,

    /// POST signed events (`room.updated`, `fairy.request.ended`, `project.ended`) to this
    /// `http(s)` URL (docs/webhooks.md). Unset: no events are recorded.
    #[arg(long, env = "FAIRYRING_WEBHOOK_URL")]
    pub webhook_url: Option<String>,

    /// Key of the webhooks' HMAC-SHA256 signatures (`fairyring-signature`); required with
    /// `--webhook-url`.
    #[arg(long, env = "FAIRYRING_WEBHOOK_SECRET", hide_env_values = true)]
    pub webhook_secret: Option<String>,

    /// A room's `room.updated` goes out once it has been this many milliseconds without an
    /// update (at the latest 10 times this after the first update it covers).
    #[arg(long, env = "FAIRYRING_WEBHOOK_DEBOUNCE_MS", default_value_t = 1000)]
    pub webhook_debounce_ms: u64,

    /// Attempts to deliver one event before it is kept as a dead letter.
    #[arg(long, env = "FAIRYRING_WEBHOOK_MAX_ATTEMPTS", default_value_t = 10)]
    pub webhook_max_attempts: u32,

    /// Milliseconds before the first retry of a webhook (doubling each time, with jitter);
    /// a knob for tests.
    #[arg(
        long,
        env = "FAIRYRING_WEBHOOK_BACKOFF_MS",
        default_value_t = 1000,
        hide = true
    )]
    pub webhook_backoff_ms: u64,

    /// Most webhook events waiting in the outbox, for the whole deployment: past it, each
    /// room's oldest waiting `room.updated` events are merged into one (a receiver reads the
    /// gap from history), then the oldest never-attempted events are dropped (counted). See
    /// docs/webhooks.md "Bounds".
    #[arg(long, env = "FAIRYRING_WEBHOOK_MAX_PENDING", default_value_t = 10_000)]
    pub webhook_max_pending: u64,

    /// How long dead letters are kept: `7d`, `12h`, `90m`, `3600s` (a plain number is
    /// seconds); `0` keeps them for ever.
    #[arg(long, env = "FAIRYRING_WEBHOOK_DEAD_RETENTION", default_value = "7d")]
    pub webhook_dead_retention: Retention,

    /// Serve `GET /metrics` on this separate address (and no longer on `--listen`), for a
    /// Prometheus that reaches a private interface.
    #[arg(long, env = "FAIRYRING_METRICS_LISTEN")]
    pub metrics_listen: Option<SocketAddr>,

    /// Pages of these origins may call the HTTP API from a browser (CORS): a comma-separated
    /// list of exact origins (`https://draw.example.com,http://localhost:5173`), or `*` for any
    /// origin. Unset: no CORS headers (only pages served from the server's own origin read its
    /// answers). Tokens travel in `Authorization`, never in cookies: no credentials are allowed.
    #[arg(long, env = "FAIRYRING_CORS_ORIGINS")]
    pub cors_origins: Option<CorsOrigins>,
}

/// The default `--fairy-writes-per-sec`: beside 100 people on 2 cores, 16 fairies drew 580–600
/// shapes/s under it while people's p99 stayed at 7.2–9.3 ms (2.8–4.5 alone; docs/benchmarks.md,
/// 2026-11-26 sixth session); under 500 they were held at 497–500. The room's write budget
/// meters it (`room::writes::write_budget`); the default is configuration's, so that configuration does
/// not depend on the room.
pub const DEFAULT_FAIRY_WRITES_PER_SEC: u32 = 600;

/// The default `--fairy-turn-max-actions`: most complete actions one model turn applies (a
/// normal turn applies a few dozen). Configuration's, as above, so that it does not depend on
/// the agent.
pub const DEFAULT_FAIRY_TURN_MAX_ACTIONS: usize = 200;

/// The default `--fairy-turn-max-secs`: longest stream of one model turn, from its first event.
pub const DEFAULT_FAIRY_TURN_MAX_SECS: u64 = 600;

/// The pace of the offline model under `--dev` without `--llm-pace-ms`, in ms per streamed
/// piece (16 characters): a house (about 60 pieces) takes about 1.9 s, so a newcomer sees the
/// fairy draw shape by shape.
pub const DEV_OFFLINE_PACE_MS: u64 = 30;

impl ServeConfig {
    /// The pace of the model's streamed text (`--llm-pace-ms`): as given (explicit 0: none),
    /// else [`DEV_OFFLINE_PACE_MS`] for the offline model under `--dev`, else none.
    pub fn llm_pace(&self) -> std::time::Duration {
        let ms = self
            .llm_pace_ms
            .unwrap_or(if self.dev && self.llm == LlmProvider::Offline {
                DEV_OFFLINE_PACE_MS
            } else {
                0
            });
        std::time::Duration::from_millis(ms)
    }

    /// A configuration for tests: any free loopback port, in-memory store, fast idle unload.
    pub fn for_test() -> Self {
        ServeConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            store: "memory:".into(),
            store_schema: None,
            store_timeout_ms: 5000,
            pubsub: None,
            pubsub_prefix: None,
            pubsub_timeout_ms: 500,
            pubsub_cluster: false,
            pubsub_sharded: false,
            advertise: None,
            jwt_secret: None,
            jwt_public_key: None,
            jwt_alg: JwtAlg::Hs256,
            jwt_issuer: None,
            jwt_audience: None,
            jwt_leeway: 5,
            insecure_no_auth: true,
            dev: false,
            idle_unload: 1,
            max_message_bytes: 1024 * 1024,
            max_connections_per_room: 512,
            max_connections: 10_000,
            max_rooms: 10_000,
            rate_per_sec: 200,
            rate_burst: 1000,
            rate_bytes_per_sec: 1024 * 1024,
            max_awareness_bytes: 16 * 1024,
            max_doc_bytes: 64 * 1024 * 1024,
            max_http_requests: 256,
            max_http_requests_per_token: 16,
            http_write_timeout: 30,
            outbound_queue: 1024,
            coalesce_us_per_peer: 50,
            compact_every: 500,
            history_checkpoint_every: 2000,
            history_retention: Retention::default(),
            history_max_bytes: 512 * 1024 * 1024,
            log_format: LogFormat::Pretty,
            llm: LlmProvider::Offline,
            llm_model: None,
            llm_base_url: None,
            llm_vision: LlmVision::Auto,
            llm_timeout: 60,
            llm_first_byte_timeout: 300,
            llm_cache_ttl: LlmCacheTtl::FiveMinutes,
            llm_structured: LlmStructured::Auto,
            llm_max_retries: 4,
            llm_pace_ms: None,
            fairy_apply_interval_ms: 250,
            fairy_apply_min_move: 64.0,
            fairy_max_iterations: 25,
            fairy_turn_max_actions: DEFAULT_FAIRY_TURN_MAX_ACTIONS,
            fairy_turn_max_secs: DEFAULT_FAIRY_TURN_MAX_SECS,
            fairy_state_layout: FairyStateLayout::Rows,
            fairy_history_chars: 100_000,
            max_fairies_per_room: 16,
            fairy_api_rate_per_min: 60,
            fairy_token_budget: 1_000_000,
            fairy_token_budget_person: 0,
            fairy_token_budget_project: 0,
            llm_prices: None,
            fairy_writes_per_sec: DEFAULT_FAIRY_WRITES_PER_SEC,
            // Test processes run many servers beside the test harness's own busy threads,
            // where idle-class fairies would wait for every other test.
            background_priority: BackgroundPriority::Nice,
            render_timeout_ms: 2000,
            webhook_url: None,
            webhook_secret: None,
            webhook_debounce_ms: 1000,
            webhook_max_attempts: 10,
            webhook_backoff_ms: 1000,
            webhook_max_pending: 10_000,
            webhook_dead_retention: Retention::of(Duration::from_secs(7 * 24 * 3600)),
            metrics_listen: None,
            cors_origins: None,
        }
    }

    /// The deadline of every Redis call (`--pubsub-timeout-ms`, at least 1 ms).
    pub fn pubsub_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.pubsub_timeout_ms.max(1))
    }

    /// The deadline of every store call (`--store-timeout-ms`, at least 1 ms).
    pub fn store_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.store_timeout_ms.max(1))
    }

    /// The Redis channel prefix of this deployment (`--pubsub-prefix`, else the store schema,
    /// else `fairyring`).
    pub fn pubsub_prefix(&self) -> &str {
        self.pubsub_prefix
            .as_deref()
            .or(self.store_schema.as_deref())
            .unwrap_or("fairyring")
    }

    /// Where the deployment's Redis is (`--pubsub`, `--pubsub-cluster`), if scaled out;
    /// several addresses without `--pubsub-cluster`, one that is not `redis://…`, or
    /// `--pubsub-cluster` without `--pubsub` are refused.
    pub fn pubsub_target(
        &self,
    ) -> Result<Option<crate::pubsub::Target>, crate::pubsub::PubSubError> {
        match &self.pubsub {
            Some(pubsub) => crate::pubsub::Target::parse(pubsub, self.pubsub_cluster)
                .map(|target| Some(target.with_deadline(self.pubsub_timeout()))),
            None if self.pubsub_cluster => Err(crate::pubsub::PubSubError::ClusterWithoutSeeds),
            None => Ok(None),
        }
    }

    /// How room messages travel between nodes (`--pubsub-sharded`; always sharded on a Redis
    /// Cluster, `--pubsub-cluster`).
    pub fn pubsub_mode(&self) -> crate::pubsub::Mode {
        if self.pubsub_sharded || self.pubsub_cluster {
            crate::pubsub::Mode::Sharded
        } else {
            crate::pubsub::Mode::Plain
        }
    }

    /// How long a connection's write may stall (`--http-write-timeout`); `None`: forever.
    pub fn http_write_timeout(&self) -> Option<Duration> {
        (self.http_write_timeout > 0).then(|| Duration::from_secs(self.http_write_timeout))
    }

    /// The budget of one render (`--render-timeout-ms`, at least 1 ms).
    pub fn render_timeout(&self) -> Duration {
        Duration::from_millis(self.render_timeout_ms.max(1))
    }

    /// The idle time after which an unused room is unloaded.
    pub fn idle_unload_after(&self) -> Duration {
        Duration::from_secs(self.idle_unload)
    }
}

/// How long history is kept (`--history-retention`); `None`: for ever.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention(Option<Duration>);

impl Retention {
    /// Keeps history for `duration` (zero: for ever).
    pub fn of(duration: Duration) -> Self {
        Retention((!duration.is_zero()).then_some(duration))
    }

    /// How long history is kept; `None` for ever.
    pub fn duration(&self) -> Option<Duration> {
        self.0
    }
}

impl Default for Retention {
    /// 30 days.
    fn default() -> Self {
        Retention::of(Duration::from_secs(30 * 24 * 3600))
    }
}

impl std::str::FromStr for Retention {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let split = text
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(text.len());
        let (number, unit) = text.split_at(split);
        let number: u64 = number
            .parse()
            .map_err(|_| format!("'{text}': expected a number with s, m, h or d (e.g. 30d)"))?;
        let seconds = match unit {
            "" | "s" => 1,
            "m" => 60,
            "h" => 3600,
            "d" => 24 * 3600,
            _ => return Err(format!("'{text}': the unit must be s, m, h or d")),
        };
        let seconds = number
            .checked_mul(seconds)
            .ok_or_else(|| format!("'{text}' is too long"))?;
        Ok(Retention::of(Duration::from_secs(seconds)))
    }
}

impl std::fmt::Display for Retention {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            None => f.write_str("0"),
            Some(d) => write!(f, "{}s", d.as_secs()),
        }
    }
}

/// The origins whose pages may call the HTTP API (`--cors-origins`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CorsOrigins {
    /// `*`: any origin.
    Any,
    /// Exact origins, `scheme://host[:port]` in lower case, without a path.
    List(Vec<String>),
}

/// Most origins `--cors-origins` takes.
const MAX_CORS_ORIGINS: usize = 64;

impl std::str::FromStr for CorsOrigins {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if text == "*" {
            return Ok(CorsOrigins::Any);
        }
        let mut list = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            if part == "*" {
                return Err("'*' stands alone: it allows every origin".into());
            }
            let origin = part.to_ascii_lowercase();
            let rest = origin
                .strip_prefix("https://")
                .or_else(|| origin.strip_prefix("http://"))
                .ok_or_else(|| format!("'{part}': an origin starts with http:// or https://"))?;
            let host_ok = !rest.is_empty()
                && rest
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']'));
            if !host_ok {
                return Err(format!(
                    "'{part}': an origin is scheme://host[:port], without a path or a trailing /"
                ));
            }
            if !list.contains(&origin) {
                list.push(origin);
            }
        }
        if list.is_empty() {
            return Err("no origin given (use * for any)".into());
        }
        if list.len() > MAX_CORS_ORIGINS {
            return Err(format!("at most {MAX_CORS_ORIGINS} origins"));
        }
        Ok(CorsOrigins::List(list))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cors_origins_parse() {
        assert_eq!("*".parse::<CorsOrigins>(), Ok(CorsOrigins::Any));
        assert_eq!(
            " https://Draw.example.com , http://localhost:5173,https://draw.example.com"
                .parse::<CorsOrigins>(),
            Ok(CorsOrigins::List(vec![
                "https://draw.example.com".into(),
                "http://localhost:5173".into()
            ]))
        );
        for bad in [
            "",
            ",",
            "draw.example.com",
            "https://a.example/",
            "https://a.example/path",
            "ftp://a.example",
            "https://a.example,*",
            "https://",
        ] {
            assert!(bad.parse::<CorsOrigins>().is_err(), "{bad}");
        }
    }

    #[test]
    fn history_retention_reads_units_and_zero_keeps_everything() {
        let days = |d: u64| Some(Duration::from_secs(d * 24 * 3600));
        assert_eq!("30d".parse::<Retention>().unwrap().duration(), days(30));
        assert_eq!(Retention::default().duration(), days(30));
        assert_eq!(
            "12h".parse::<Retention>().unwrap().duration(),
            Some(Duration::from_secs(12 * 3600))
        );
        assert_eq!(
            "90m".parse::<Retention>().unwrap().duration(),
            Some(Duration::from_secs(5400))
        );
        for seconds in ["3600", "3600s", " 3600s "] {
            assert_eq!(
                seconds.parse::<Retention>().unwrap().duration(),
                Some(Duration::from_secs(3600)),
                "{seconds}"
            );
        }
        for forever in ["0", "0d"] {
            assert_eq!(forever.parse::<Retention>().unwrap().duration(), None);
        }
        for bad in ["", "d", "30w", "-1d", "1.5h", "99999999999999999999d"] {
            assert!(bad.parse::<Retention>().is_err(), "{bad}");
        }
        // What --help shows as the default reads back the same.
        let shown = Retention::default().to_string();
        assert_eq!(shown.parse::<Retention>().unwrap(), Retention::default());
    }

    #[test]
    fn a_redis_cluster_is_sharded_and_contradictions_are_refused() {
        use crate::pubsub::{Mode, PubSubError, Servers};
        let config = |pubsub: Option<&str>, cluster: bool, sharded: bool| ServeConfig {
            pubsub: pubsub.map(str::to_owned),
            pubsub_cluster: cluster,
            pubsub_sharded: sharded,
            ..ServeConfig::for_test()
        };
        let single = config(Some("redis://a:6379"), false, false);
        assert!(matches!(
            single.pubsub_target().map(|t| t.map(|t| t.servers)),
            Ok(Some(Servers::Single(_)))
        ));
        assert_eq!(
            single.pubsub_target().ok().flatten().map(|t| t.deadline),
            Some(std::time::Duration::from_millis(500)),
            "--pubsub-timeout-ms"
        );
        assert_eq!(single.pubsub_mode(), Mode::Plain);
        let cluster = config(Some("redis://a:7000,redis://b:7000"), true, false);
        assert!(
            matches!(cluster.pubsub_target().map(|t| t.map(|t| t.servers)), Ok(Some(Servers::Cluster(seeds))) if seeds.len() == 2)
        );
        assert_eq!(
            cluster.pubsub_mode(),
            Mode::Sharded,
            "a cluster implies sharded"
        );
        assert_eq!(
            config(Some("redis://a:7000"), true, true).pubsub_mode(),
            Mode::Sharded
        );
        assert!(matches!(
            config(Some("redis://a:7000,redis://b:7000"), false, true).pubsub_target(),
            Err(PubSubError::SeedsWithoutCluster(2))
        ));
        assert!(matches!(
            config(None, true, false).pubsub_target(),
            Err(PubSubError::ClusterWithoutSeeds)
        ));
        assert!(matches!(
            config(None, false, false).pubsub_target(),
            Ok(None)
        ));
    }
}
