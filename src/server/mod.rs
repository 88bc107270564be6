//! The network edge: the only module that touches sockets.
//!
//! Owns the HTTP router (`/rooms/{room}` WebSocket upgrade, `/healthz`, `/metrics` — or a
//! listener of its own for it with `--metrics-listen` —, JSON `404 not_found` for any other
//! path, the web demo, the fairy API in [`fairies`], image exports in [`export`], room instructions in
//! [`instructions`], the fairies' model usage in [`usage`], history, versions, restore and
//! rollback in [`history`], REST writes in
//! [`rest`], review-mode decisions in [`review`], the OpenAPI description of all of them in [`openapi`]), connection admission, the WebSocket handshake
//! ([`upgrade`]), request-body limits ([`body`]), per-socket tasks ([`ws`]), the mapping of
//! errors to HTTP and close codes ([`error`]), logging set-up ([`logging`]) and graceful
//! shutdown (SIGINT/SIGTERM flush every room). Rooms, stores and auth are used through their module APIs.

pub mod access;
pub mod body;
pub mod cors;
pub mod error;
pub mod export;
pub mod fairies;
pub mod forward;
pub mod health;
pub mod held_body;
pub mod history;
pub mod http_limits;
pub mod instructions;
pub mod logging;
pub mod openapi;
pub mod projects;
pub mod rest;
pub mod review;
pub mod upgrade;
pub mod usage;
pub mod web_demo;
pub mod write_rate;
pub mod write_timeout;
pub mod ws;

use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::serve::ListenerExt;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::config::ServeConfig;
use crate::room::{RoomConfig, Rooms};

/// How long shutdown waits for sockets to send their close frames before flushing rooms.
const SOCKET_DRAIN: Duration = Duration::from_secs(3);

/// Shared state of the HTTP handlers.
#[derive(Clone)]
pub struct AppState {
    /// The configuration the server started with.
    pub config: Arc<ServeConfig>,
    /// Every loaded room.
    pub rooms: Rooms,
    /// Cancelled when the server shuts down.
    pub shutdown: CancellationToken,
    /// Permits for open WebSocket connections (`--max-connections`).
    pub connections: Arc<Semaphore>,
    /// Tracks socket tasks so shutdown can wait for their close frames.
    pub tracker: TaskTracker,
    /// Token verification; `None` only with `--insecure-no-auth` and no key configured.
    pub auth: Option<Arc<crate::auth::Authenticator>>,
    /// The fairies hosted in every room.
    pub fairies: crate::agent::host::hub::FairyHub,
    /// The per-token rate limit on the fairy API (`None`: unlimited).
    pub fairy_rate: Option<Arc<fairies::FairyRate>>,
    /// The store rooms live in (for `/healthz`).
    pub store: Arc<dyn crate::store::Store>,
    /// The fan-out to the other nodes (`--pubsub`), when scaled out.
    pub pubsub: Option<Arc<crate::pubsub::redis::RedisFanout>>,
    /// Where exports render (`--render-timeout-ms`); closed at shutdown.
    pub renders: Arc<crate::canvas::render::pool::RenderPool>,
    /// What exports read from rooms not loaded here (one decode per room and moment).
    pub export_reads: Arc<export::reads::ExportReads>,
    /// Rooms' history: pages, versions, restore, rollback.
    pub history: Arc<crate::history::service::History>,
    /// The per-token rate limit on REST writes (the socket's rates, per `sub`).
    pub write_rate: Arc<write_rate::WriteRate>,
    /// The caps on HTTP requests in flight (per process, per token).
    pub http_limits: Arc<http_limits::HttpLimits>,
}

/// A running server (returned by [`start`]).
pub struct ServerHandle {
    addr: SocketAddr,
    metrics_addr: Option<SocketAddr>,
    state: AppState,
    task: tokio::task::JoinHandle<()>,
}

impl ServerHandle {
    /// The bound address (useful with port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The bound address of the metrics listener (`--metrics-listen`), if one was asked for.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// The room registry (for tests and embedding).
    pub fn rooms(&self) -> &Rooms {
        &self.state.rooms
    }

    /// HTTP requests holding a place under `--max-http-requests` now (for tests and embedding).
    pub fn http_requests_in_flight(&self) -> usize {
        self.state.http_limits.in_flight()
    }

    /// Stops accepting, closes every socket, flushes every room and waits for all of it.
    pub async fn shutdown(self) {
        self.state.shutdown.cancel();
        let _ = self.task.await;
    }

    /// Resolves when the server has stopped (after a shutdown signal or [`ServerHandle::shutdown`]).
    pub async fn stopped(self) {
        let _ = self.task.await;
    }
}

/// Binds and starts the server in the background with the configured store.
pub async fn start(config: ServeConfig) -> anyhow::Result<ServerHandle> {
    let store = crate::store::open_in(&config.store, config.store_schema.as_deref()).await?;
    start_with(config, RoomConfig::from_serve, store).await
}

/// Starts the server with an explicit store and a hook to adjust room settings (tests inject a
/// clock or shorter sweeps this way).
pub async fn start_with(
    config: ServeConfig,
    room_config: impl FnOnce(&ServeConfig) -> RoomConfig,
    store: Arc<dyn crate::store::Store>,
) -> anyhow::Result<ServerHandle> {
    crate::priority::set_background(config.background_priority);
    // Every store call under `--store-timeout-ms`, and a full disk remembered until space
    // returns (docs/operations.md "What happens when …").
    let store = crate::store::guarded::Guarded::wrap(store, config.store_timeout());
    let auth = authenticator(&config, store.as_ref()).await?;
    // A webhook URL that is not http(s), or without a secret, is refused before anything starts.
    let webhooks = crate::webhooks::WebhookSettings::from_serve(&config)?;
    let listener = tokio::net::TcpListener::bind(config.listen).await?;
    let addr = listener.local_addr()?;
    let pubsub_target = config.pubsub_target()?;
    let pubsub = match &pubsub_target {
        Some(target) => {
            let prefix = crate::pubsub::Prefix::parse(config.pubsub_prefix())?;
            Some(Arc::new(
                crate::pubsub::redis::RedisFanout::start(target, prefix, config.pubsub_mode())
                    .await?,
            ))
        }
        None => None,
    };
    let mut rooms_config = room_config(&config);
    rooms_config.fanout = pubsub.as_ref().map(|p| p.fanout().clone());
    if pubsub.is_some() {
        // Scaled out, this node's own client id for its writes into documents.
        rooms_config.client_id = store.writer_client_id().await?;
    }
    // The committers take the history's checkpoints (docs/storage.md "History").
    rooms_config
        .checkpoints
        .get_or_insert_with(|| Arc::new(crate::history::checkpoint::HistoryCheckpoints));
    // Webhooks record into the store's outbox; the rooms stop them after their last flush.
    rooms_config.webhooks = match webhooks {
        Some(settings) => Some(crate::webhooks::Webhooks::start(settings, store.clone())?),
        None => None,
    };
    // Every room load moves fairies' private state out of documents of earlier versions.
    let rooms = Rooms::with_load_hook(
        store.clone(),
        rooms_config,
        config.max_rooms,
        Some(Arc::new(
            crate::agent::host::migration::LegacyStateMigration,
        )),
    );
    let model = crate::llm::model_from_config(&config)?;
    let runtime = crate::agent::state::RuntimeConfig {
        max_iterations: config.fairy_max_iterations.max(1),
        turn_max_actions: config.fairy_turn_max_actions,
        turn_max_time: (config.fairy_turn_max_secs > 0)
            .then(|| std::time::Duration::from_secs(config.fairy_turn_max_secs)),
        history_budget: config.fairy_history_chars.max(1000),
        throttle: crate::agent::apply::throttle::ThrottleConfig::from_serve(&config),
        vision: crate::llm::vision::vision_enabled(&config),
        state_layout: config.fairy_state_layout,
    };
    let prices = match &config.llm_prices {
        Some(path) => crate::llm::prices::Prices::load(path)?,
        None => crate::llm::prices::Prices::defaults(),
    };
    let limits = crate::agent::host::hub::HubLimits {
        max_per_room: config.max_fairies_per_room,
        token_budget: config.fairy_token_budget,
        person_budget: config.fairy_token_budget_person,
        project_budget: config.fairy_token_budget_project,
        prices,
        one_hour_cache: config.llm_cache_ttl == crate::config::LlmCacheTtl::OneHour,
    };
    // Scaled out, a fairy is hosted by the node holding its lease; the others forward its
    // API calls here, at the bound address (docs/scaling.md "Fairies across nodes").
    let advertised = config.advertise.clone().unwrap_or_else(|| addr.to_string());
    let leases = pubsub.as_ref().map(|p| p.leases(advertised));
    let fairies = crate::agent::host::hub::FairyHub::with_leases(
        rooms.clone(),
        model,
        runtime,
        limits,
        leases,
    );
    // Scaled out, projects span nodes: each node listens on its own channel (until the
    // server has stopped).
    let direct_stop = CancellationToken::new();
    if let (Some(target), Some(pubsub)) = (&pubsub_target, &pubsub) {
        let prefix = crate::pubsub::Prefix::parse(config.pubsub_prefix())?;
        let (channel, inbound) = crate::pubsub::direct::DirectChannel::start(
            target,
            prefix,
            pubsub.fanout().node(),
            direct_stop.clone(),
        )
        .await?;
        fairies.connect_nodes(channel, inbound);
    }
    // Screenshots render in their own process-wide pool; its budget is the server's.
    crate::agent::prompt::screenshot::pool().set_budget(config.render_timeout());
    let state = AppState {
        renders: Arc::new(export::render_pool(config.render_timeout())),
        export_reads: Arc::new(export::reads::ExportReads::default()),
        history: Arc::new(crate::history::service::History::new(store.clone())),
        fairies,
        fairy_rate: fairies::rate_limiter(config.fairy_api_rate_per_min),
        write_rate: Arc::new(write_rate::WriteRate::from_config(&config)),
        http_limits: Arc::new(http_limits::HttpLimits::from_config(&config)),
        connections: Arc::new(Semaphore::new(config.max_connections)),
        config: Arc::new(config),
        rooms,
        shutdown: CancellationToken::new(),
        tracker: TaskTracker::new(),
        auth,
        store,
        pubsub,
    };
    let metrics_addr = match state.config.metrics_listen {
        Some(addr) => Some(start_metrics(addr, state.shutdown.clone()).await?),
        None => None,
    };
    let app = router(state.clone());
    // TCP_NODELAY on every accepted socket: y-sync frames are small, and with Nagle's
    // algorithm a frame written while an earlier one is unacknowledged waits for the peer's
    // delayed ACK (40 ms on Linux) — that was the whole p99 of a busy room.
    let listener = listener.tap_io(|tcp| {
        if let Err(error) = tcp.set_nodelay(true) {
            tracing::debug!(%error, "could not set TCP_NODELAY on an accepted socket");
        }
    });
    // A write that makes no progress for --http-write-timeout ends its connection, releasing
    // the answer it held and its place under --max-http-requests.
    let listener =
        write_timeout::WriteTimeoutListener::new(listener, state.config.http_write_timeout());
    let serve_state = state.clone();
    let task = tokio::spawn(async move {
        let shutdown = serve_state.shutdown.clone();
        if let Some(keep) = serve_state.config.history_retention.duration() {
            tokio::spawn(prune_history(
                serve_state.store.clone(),
                keep,
                shutdown.clone(),
            ));
        }
        if serve_state.config.history_max_bytes > 0 {
            tokio::spawn(cap_history(
                serve_state.store.clone(),
                serve_state.config.history_max_bytes,
                shutdown.clone(),
            ));
        }
        // Renders stop at once on shutdown, so that no export holds up the graceful end.
        let renders = serve_state.renders.clone();
        let render_stop = shutdown.clone();
        tokio::spawn(async move {
            render_stop.cancelled().await;
            renders.close();
        });
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(shutdown.cancelled_owned())
            .await;
        if let Err(error) = served {
            tracing::error!(%error, "http server failed");
        }
        serve_state.tracker.close();
        if tokio::time::timeout(SOCKET_DRAIN, serve_state.tracker.wait())
            .await
            .is_err()
        {
            tracing::warn!("some sockets did not close in time");
        }
        // Fairies first: their requests are aborted and reverted before the rooms flush.
        serve_state.fairies.shutdown().await;
        serve_state.rooms.shutdown().await;
        if let Some(pubsub) = &serve_state.pubsub {
            pubsub.stop().await;
        }
        direct_stop.cancel();
        tracing::info!("all rooms flushed; server stopped");
    });
    tracing::info!(%addr, store = %crate::redact::url(&state.config.store), "fairyring listening");
    Ok(ServerHandle {
        addr,
        metrics_addr,
        state,
        task,
    })
}

/// How often history older than `--history-retention` is dropped.
const PRUNE_EVERY: Duration = Duration::from_secs(3600);

/// Drops history older than `keep`, a minute after the start and then every [`PRUNE_EVERY`],
/// until shutdown.
async fn prune_history(
    store: Arc<dyn crate::store::Store>,
    keep: Duration,
    shutdown: CancellationToken,
) {
    let mut next = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        tokio::select! {
            _ = tokio::time::sleep_until(next) => {}
            _ = shutdown.cancelled() => return,
        }
        next += PRUNE_EVERY;
        let keep_ms = u64::try_from(keep.as_millis()).unwrap_or(u64::MAX);
        let before = crate::store::now_millis().saturating_sub(keep_ms);
        match store.prune_history(before).await {
            Ok(0) => {}
            Ok(dropped) => tracing::info!(dropped, "dropped history older than the retention"),
            Err(error) => tracing::warn!(%error, "dropping old history failed; will retry"),
        }
    }
}

/// How often rooms' logs are checked against `--history-max-bytes`.
const CAP_HISTORY_EVERY: Duration = Duration::from_secs(60);

/// Keeps every room's log within `max_bytes` ([`crate::history::retention::enforce_cap`]),
/// every [`CAP_HISTORY_EVERY`], until shutdown.
async fn cap_history(
    store: Arc<dyn crate::store::Store>,
    max_bytes: u64,
    shutdown: CancellationToken,
) {
    let mut next = tokio::time::Instant::now() + CAP_HISTORY_EVERY;
    loop {
        tokio::select! {
            _ = tokio::time::sleep_until(next) => {}
            _ = shutdown.cancelled() => return,
        }
        next += CAP_HISTORY_EVERY;
        if let Err(error) = crate::history::retention::enforce_cap(&store, max_bytes).await {
            tracing::warn!(%error, "keeping history within --history-max-bytes failed; will retry");
        }
    }
}

/// Token verification from the configuration; `None` only when explicitly insecure.
async fn authenticator(
    config: &ServeConfig,
    store: &dyn crate::store::Store,
) -> anyhow::Result<Option<Arc<crate::auth::Authenticator>>> {
    let keyless = config.jwt_secret.is_none() && config.jwt_public_key.is_none();
    if keyless && !config.dev && config.insecure_no_auth {
        tracing::warn!(
            "AUTHENTICATION IS OFF (--insecure-no-auth): anyone can read and write every room"
        );
        return Ok(None);
    }
    // `--dev` without a secret signs with the one the store keeps (made at the first start),
    // so pages opened before a restart keep working (docs/auth.md "Development mode").
    let kept = if config.dev
        && config.jwt_secret.is_none()
        && config.jwt_alg == crate::config::JwtAlg::Hs256
    {
        let candidate = crate::auth::Authenticator::new_dev_secret();
        Some(store.dev_secret(&candidate).await?)
    } else {
        None
    };
    let auth = crate::auth::Authenticator::with_dev_secret(config, kept.as_deref())?;
    if config.dev {
        tracing::warn!(
            "DEV MODE (--dev): POST /auth/dev-token hands a read/write token for every room to anyone who asks; never use it in production"
        );
    }
    Ok(Some(Arc::new(auth)))
}

/// The HTTP routes.
pub fn router(state: AppState) -> Router {
    // The fairy routes take the layer that forwards a call to the node hosting the fairy,
    // the project routes the one that forwards it to the node hosting the project's leader.
    let fairy_routes = fairies::routes().route_layer(axum::middleware::from_fn_with_state(
        state.clone(),
        forward::forward,
    ));
    let project_routes = projects::routes().route_layer(axum::middleware::from_fn_with_state(
        state.clone(),
        forward::forward_projects,
    ));
    let (api, described) = api(
        state.config.dev,
        state.config.metrics_listen.is_none(),
        fairy_routes,
        project_routes,
    )
    .split_for_parts();
    let limits = axum::middleware::from_fn_with_state(state.clone(), http_limits::admit);
    let cors = state.config.cors_origins.as_ref().map(cors::layer);
    let app = api
        .layer(axum::Extension(openapi::Described::new(&described)))
        .with_state(state)
        .merge(web_demo::routes())
        .fallback(not_found)
        .layer(axum::extract::DefaultBodyLimit::max(error::MAX_BODY_BYTES))
        .layer(axum::middleware::from_fn(body::limit))
        .layer(limits)
        .layer(axum::middleware::map_response(error::json_errors));
    // Outermost: a preflight is answered before the limits and the routes, and every answer
    // (errors included) carries the headers.
    match cors {
        Some(cors) => app.layer(cors),
        None => app,
    }
}

/// Every API route with its description, as served with `--dev` (`POST /auth/dev-token`) or
/// not, and with `/metrics` on the main listener or not (`--metrics-listen`); `fairy_routes`
/// are [`fairies::routes`] and `project_routes` [`projects::routes`], layered or not. Every
/// route goes through `routes!`: served and described in one step.
fn api(
    dev: bool,
    metrics_here: bool,
    fairy_routes: OpenApiRouter<AppState>,
    project_routes: OpenApiRouter<AppState>,
) -> OpenApiRouter<AppState> {
    let mut api = OpenApiRouter::with_openapi(openapi::frame())
        .routes(routes!(ws::upgrade))
        .routes(routes!(health::healthz))
        .routes(routes!(openapi::describe));
    if metrics_here {
        api = api.routes(routes!(metrics));
    }
    if dev {
        api = api.routes(routes!(access::dev_token));
    }
    api.merge(project_routes)
        .merge(export::routes())
        .merge(history::routes())
        .merge(rest::routes())
        .merge(review::routes())
        .merge(instructions::routes())
        .merge(usage::routes())
        .merge(fairy_routes)
}

/// The OpenAPI description of every route this build can serve (`--dev`'s token route and
/// `/metrics` on the main listener included), as `fairyring openapi` prints it and the web
/// demo's API types are generated from.
pub fn openapi_description() -> utoipa::openapi::OpenApi {
    api(true, true, fairies::routes(), projects::routes()).into_openapi()
}

/// Unknown routes: JSON like every other error.
async fn not_found(uri: axum::http::Uri) -> error::ApiError {
    error::ApiError::new(
        axum::http::StatusCode::NOT_FOUND,
        "not_found",
        format!("no route {}", uri.path()),
    )
}

/// Serves `GET /metrics` alone on `addr` (`--metrics-listen`) until `shutdown`; returns the
/// bound address.
async fn start_metrics(
    addr: SocketAddr,
    shutdown: CancellationToken,
) -> anyhow::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let app = Router::new()
        .route("/metrics", get(metrics))
        .fallback(not_found);
    tokio::spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(shutdown.cancelled_owned())
            .await;
        if let Err(error) = served {
            tracing::error!(%error, "metrics listener failed");
        }
    });
    tracing::info!(addr = %bound, "metrics listening");
    Ok(bound)
}

/// The server's metrics.
#[utoipa::path(
    get,
    operation_id = "metrics",
    path = "/metrics",
    tag = "server",
    responses((status = 200, description = "Prometheus/OpenMetrics text (on its own listener with `--metrics-listen`)", content_type = "application/openmetrics-text", body = String)),
)]
async fn metrics() -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        crate::metrics::global().render(),
    )
}

/// Runs the server until SIGINT or SIGTERM, then shuts down gracefully.
pub async fn run(config: ServeConfig) -> anyhow::Result<()> {
    let handle = start(config).await?;
    // The first line on stdout names the address, for scripts and tests that use port 0.
    let mut stdout = std::io::stdout();
    let _ = writeln!(stdout, "listening on http://{}", handle.addr());
    if handle.state.config.dev {
        let _ = writeln!(
            stdout,
            "open http://{}/?room=demo in two browsers",
            handle.addr()
        );
    }
    let _ = stdout.flush();
    let token = handle.state.shutdown.clone();
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("shutdown signal received; flushing rooms");
        token.cancel();
    });
    handle.stopped().await;
    Ok(())
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
