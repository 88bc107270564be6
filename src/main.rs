//! The `fairyring` binary: subcommands over the library.

use std::time::Duration;

use clap::{Parser, Subcommand};

/// How long the process waits at exit for work left on the blocking pool.
const BLOCKING_GRACE: Duration = Duration::from_secs(1);

/// fairyring: a Yjs collaboration server for infinite canvases, with AI agents ("fairies")
/// that draw alongside people.
#[derive(Debug, Parser)]
#[command(name = "fairyring", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the server (WebSocket rooms at /rooms/{room}, fairies, /healthz, /metrics).
    Serve(Box<fairyring::config::ServeConfig>),
    /// Load-test a running server: N y-sync clients in one room, latency percentiles, RSS
    /// (developer tooling: only in builds with the `dev-tools` feature, as `cargo test` makes).
    #[cfg(feature = "dev-tools")]
    Bench(Box<fairyring::bench::BenchArgs>),
    /// Mint an HS256 token signed with the server's secret and print it on stdout.
    Token(fairyring::auth::TokenArgs),
    /// Serve scripted model answers (Anthropic and OpenAI wire formats) for tests and demos
    /// (test tooling: only in builds with the `dev-tools` feature, as `cargo test` makes).
    #[cfg(feature = "dev-tools")]
    MockModel(fairyring::llm::mock::MockModelArgs),
    /// Print the OpenAPI 3.1 description of the HTTP API (what `GET /openapi.json` serves
    /// with `--dev`), to generate clients without running a server.
    Openapi,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(config) => {
            fairyring::room::cap_arenas();
            fairyring::server::logging::init(config.log_format);
            let runtime = runtime()?;
            let served = runtime.block_on(fairyring::server::run(*config));
            // Shutdown has stopped every render; one still on the blocking pool ends at its
            // next check. Dropping the runtime would wait for it without bound.
            runtime.shutdown_timeout(BLOCKING_GRACE);
            served
        }
        #[cfg(feature = "dev-tools")]
        Command::Bench(args) => runtime()?.block_on(fairyring::bench::run(*args)),
        #[cfg(feature = "dev-tools")]
        Command::MockModel(args) => runtime()?.block_on(fairyring::llm::mock::run(args)),
        Command::Openapi => {
            let description = fairyring::server::openapi_description().to_pretty_json()?;
            println!("{description}");
            Ok(())
        }
        Command::Token(args) => {
            let token = fairyring::auth::mint_from_args(&args, fairyring::auth::unix_now())?;
            println!("{token}");
            Ok(())
        }
    }
}

fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
}

/// The process's allocator: jemalloc, with a background thread that returns freed memory to
/// the system about a second after it was freed (`dirty_decay_ms`; `muzzy_decay_ms: 0` so
/// that it is really unmapped, not only marked for lazy reuse). Beside 16 drawing fairies on
/// 2 cores, glibc's allocator left the server at 196–228 MB after the load, holding the peaks
/// of the snapshot thread's private copies of the room (docs/storage.md "Compaction") and its
/// arenas' fragmentation; jemalloc 123–149 MB, people's latency and the fairies' throughput
/// unchanged or better (docs/benchmarks.md, 2026-11-26 sixth session). `_RJEM_MALLOC_CONF` at run
/// time overrides these settings. Only the binary: the library leaves the choice to whoever
/// embeds it.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's compiled-in options (the `malloc_conf` symbol of its C interface, under the
/// prefix `tikv-jemalloc-sys` gives its symbols).
#[cfg(not(target_env = "msvc"))]
#[unsafe(export_name = "_rjem_malloc_conf")]
static MALLOC_CONF: MallocConf =
    MallocConf(c"background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0".as_ptr());

/// A C string pointer the allocator reads at start-up.
#[cfg(not(target_env = "msvc"))]
#[repr(transparent)]
struct MallocConf(*const std::ffi::c_char);

// SAFETY: the pointer is to a static, immutable C string literal; nothing writes through it.
#[cfg(not(target_env = "msvc"))]
unsafe impl Sync for MallocConf {}
