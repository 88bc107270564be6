//! Scripted model answers: the script format and its rendering in both wire formats, which the
//! offline model streams its answers through (so they take the providers' parsing path), and
//! the mock model server for tests and `fairyring mock-model`, serving scripts over real HTTP
//! on loopback with fault injection.
//!
//! # Layout
//! - [`script`]: the JSON script format (responses in order, faults).
//! - [`wire`]: rendering a scripted response as Anthropic or OpenAI SSE bytes (pure).
//! - `server`: the axum server that serves scripts, records requests and disconnects. Test
//!   tooling: compiled only with the `dev-tools` feature (`cargo test` turns it on through the
//!   package's dev-dependency on itself; release builds leave it out), like [`run`].
//!
//! The server's production paths use only `script` and `wire` (the offline model).

pub mod script;
#[cfg(feature = "dev-tools")]
pub mod server;
pub mod wire;

#[cfg(feature = "dev-tools")]
use std::net::SocketAddr;
#[cfg(feature = "dev-tools")]
use std::path::PathBuf;

#[cfg(feature = "dev-tools")]
use clap::Args;

pub use script::{Fault, MockResponse, MockRoute, MockScript, ScriptError};
#[cfg(feature = "dev-tools")]
pub use server::{MockServer, RecordedRequest};

/// Flags of `fairyring mock-model`.
#[cfg(feature = "dev-tools")]
#[derive(Debug, Clone, Args)]
pub struct MockModelArgs {
    /// Address to listen on (loopback; port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:8089")]
    pub listen: SocketAddr,
    /// JSON script of responses (see `tests/fixtures/models/`).
    #[arg(long)]
    pub script: PathBuf,
}

/// Runs the mock server until Ctrl-C, printing its base URL in the log.
#[cfg(feature = "dev-tools")]
pub async fn run(args: MockModelArgs) -> anyhow::Result<()> {
    // The subcommand runs alone: make its log visible (ignored if a subscriber exists).
    let _ = tracing_subscriber::fmt().try_init();
    let script = MockScript::load(&args.script)?;
    let server = MockServer::bind(args.listen, script).await?;
    tracing::info!(base_url = %server.base_url(), script = %args.script.display(), "mock model server listening");
    tokio::signal::ctrl_c().await?;
    tracing::info!(
        requests = server.requests().len(),
        disconnects = server.disconnects(),
        "mock model server stopping"
    );
    Ok(())
}
