//! Log set-up: `tracing` with `--log-format pretty|json`, filtered by `RUST_LOG`
//! (default `info`).

use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;

/// Installs the global subscriber (once; later calls are ignored).
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Pretty => builder.try_init(),
    };
}
