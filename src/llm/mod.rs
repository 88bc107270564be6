//! Language-model providers: streaming clients, failover, the offline model and a mock server
//! (test tooling: its HTTP server only with the feature `dev-tools`).
//!
//! Owns: HTTP calls to model providers and their wire formats. Must not touch rooms or
//! documents: callers (the fairy runtime) get a [`Model`] and consume its [`ModelEvent`]s.
//!
//! # Layout
//! - [`types`]: [`Model`], [`ModelRequest`] (with the asking fairy's [`Mode`], which
//!   only the offline model reads), [`ModelEvent`] (provider-neutral).
//! - [`error`]: [`LlmError`] and error classification (retriable or not).
//! - [`sse`]: `reqwest` + `eventsource-stream` glue, idle timeout, the [`sse::Decoder`] loop.
//! - [`anthropic`], [`openai`]: the two wire formats (request bodies, decoders, capabilities).
//! - [`failover`]: auth profiles, cooldowns (1 s doubling to 60 s), retries.
//! - [`structured`]: structured output (`--llm-structured`): when it is asked for, what a
//!   refusal looks like, the fallback to the prompt's schema.
//! - [`usage`]: token accounting.
//! - [`prices`]: prices per model (`--llm-prices`) and the cost of a call.
//! - [`offline`]: the embedded default model (no network, no key), with its project answers
//!   ([`offline::project`]) and where a drawing goes (free space near the person's view,
//!   [`offline::place`]) as children.
//! - [`paced`]: spacing a model's text out in time (`--llm-pace-ms`).
//! - [`mock`]: scripted answers rendered in the providers' wire formats (which the offline
//!   model streams through too) and, with the `dev-tools` feature that `cargo test` turns on
//!   and release builds leave out, the mock model server (tests and `fairyring mock-model`).
//! - [`vision`]: which models take images (`--llm-vision auto`).

pub mod anthropic;
pub mod error;
pub mod failover;
pub mod mock;
pub mod offline;
pub mod openai;
pub mod paced;
pub mod prices;
pub mod sse;
pub mod structured;
pub mod types;
pub mod usage;
pub mod vision;

use std::sync::Arc;
use std::time::Duration;

pub use error::LlmError;
pub use failover::{FailoverConfig, FailoverModel, Profile, Provider};
pub use offline::OfflineModel;
pub use types::{
    Billing, CachePoint, ChatMessage, Mode, Model, ModelEvent, ModelRequest, ModelStream, Part,
    ResponseSchema, Role,
};
pub use usage::{Usage, UsageLedger};

use crate::clock::SystemClock;
use crate::config::{LlmProvider, ServeConfig};

/// Longest wait for a TCP/TLS connection to a provider.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The model fairies think with, from `--llm`, `--llm-model`, `--llm-base-url`,
/// `--llm-timeout`, `--llm-max-retries`, `--llm-pace-ms` and the `ANTHROPIC_API_KEY` /
/// `OPENAI_API_KEY` environment variables (comma-separated: one profile per key).
pub fn model_from_config(config: &ServeConfig) -> Result<Arc<dyn Model>, LlmError> {
    let env_var = match config.llm {
        LlmProvider::Anthropic => "ANTHROPIC_API_KEY",
        LlmProvider::Openai => "OPENAI_API_KEY",
        LlmProvider::Offline => "",
    };
    let keys = (!env_var.is_empty())
        .then(|| std::env::var(env_var).ok())
        .flatten();
    let model = model_with_keys(config, keys.as_deref())?;
    Ok(paced::paced(model, config.llm_pace()))
}

/// [`model_from_config`] with the keys given (comma-separated) instead of read from the
/// environment; tests use it.
pub fn model_with_keys(
    config: &ServeConfig,
    keys: Option<&str>,
) -> Result<Arc<dyn Model>, LlmError> {
    let idle = Duration::from_secs(config.llm_timeout.max(1));
    let first_byte = Duration::from_secs(config.llm_first_byte_timeout.max(1));
    let failover = FailoverConfig {
        max_retries: config.llm_max_retries,
    };
    let build_http = || {
        reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .map_err(|e| LlmError::Config(format!("http client: {e}")))
    };
    let (provider, default_url, needs_key): (Arc<dyn Provider>, &str, bool) = match config.llm {
        LlmProvider::Offline => {
            tracing::info!(
                "using the offline model: fairies draw simple things without a language model (set --llm anthropic|openai for a real one)"
            );
            return Ok(Arc::new(OfflineModel));
        }
        LlmProvider::Anthropic => {
            let model = config
                .llm_model
                .as_deref()
                .unwrap_or(anthropic::DEFAULT_MODEL);
            let p = anthropic::AnthropicProvider::new(build_http()?, model, idle)
                .with_cache_ttl(config.llm_cache_ttl)
                .with_first_byte_timeout(first_byte)
                .with_structured(config.llm_structured);
            // api.anthropic.com needs a key; a server of your own (llama.cpp's Anthropic
            // endpoint, a proxy) may not.
            let needs_key = config.llm_base_url.is_none();
            (Arc::new(p), anthropic::DEFAULT_BASE_URL, needs_key)
        }
        LlmProvider::Openai => {
            let model = config.llm_model.as_deref().unwrap_or(openai::DEFAULT_MODEL);
            let p = openai::OpenAiProvider::new(build_http()?, model, idle)
                .with_first_byte_timeout(first_byte)
                .with_structured(config.llm_structured);
            // Local servers (Ollama, llama.cpp, vLLM) need no key; api.openai.com does.
            let needs_key = config.llm_base_url.is_none();
            (Arc::new(p), openai::DEFAULT_BASE_URL, needs_key)
        }
    };
    let urls = config.llm_base_url.as_deref().unwrap_or(default_url);
    let profiles = profiles(urls, keys);
    if needs_key && profiles.iter().all(|p| p.api_key.is_none()) {
        return Err(LlmError::Config(format!(
            "{} needs an API key (set {})",
            provider.name(),
            if matches!(config.llm, LlmProvider::Anthropic) {
                "ANTHROPIC_API_KEY"
            } else {
                "OPENAI_API_KEY"
            }
        )));
    }
    tracing::info!(model = %provider.name(), profiles = profiles.len(), "language model configured");
    let model = FailoverModel::new(provider, profiles, Arc::new(SystemClock), failover)?;
    Ok(Arc::new(model))
}

/// One profile per (endpoint, key) pair, keys first: `urls` and `keys` are comma-separated;
/// no key gives keyless profiles (local servers).
pub fn profiles(urls: &str, keys: Option<&str>) -> Vec<Profile> {
    let split = |s: &str| -> Vec<String> {
        s.split(',')
            .map(str::trim)
            .filter(|x| !x.is_empty())
            .map(str::to_owned)
            .collect()
    };
    let urls = split(urls);
    let keys: Vec<Option<String>> = match keys.map(split) {
        Some(k) if !k.is_empty() => k.into_iter().map(Some).collect(),
        _ => vec![None],
    };
    let mut out = Vec::new();
    for (ki, key) in keys.iter().enumerate() {
        for url in &urls {
            let host = url
                .split("://")
                .nth(1)
                .unwrap_or(url)
                .split('/')
                .next()
                .unwrap_or_default();
            let label = match key {
                Some(_) => format!("key#{}@{host}", ki + 1),
                None => format!("nokey@{host}"),
            };
            out.push(Profile::new(label, url, key.clone()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_from_lists() {
        let p = profiles("http://a:1/v1, http://b:2", Some("k1,k2,"));
        let labels: Vec<&str> = p.iter().map(|p| p.label.as_str()).collect();
        assert_eq!(labels, ["key#1@a:1", "key#1@b:2", "key#2@a:1", "key#2@b:2"]);
        assert_eq!(p[0].base_url, "http://a:1");
        assert_eq!(p[3].api_key.as_deref(), Some("k2"));
        let p = profiles("http://localhost:11434", None);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].api_key, None);
    }

    #[test]
    fn config_selects_provider() {
        let mut c = ServeConfig::for_test();
        assert_eq!(
            model_with_keys(&c, None).map(|m| m.name()).ok().as_deref(),
            Some("offline")
        );
        c.llm = LlmProvider::Anthropic;
        assert!(matches!(
            model_with_keys(&c, None),
            Err(LlmError::Config(_))
        ));
        assert!(matches!(
            model_with_keys(&c, Some(" , ")),
            Err(LlmError::Config(_))
        ));
        let m = model_with_keys(&c, Some("k1,k2")).map(|m| m.name());
        assert_eq!(m.ok().as_deref(), Some("anthropic:claude-sonnet-4-5"));
        c.llm = LlmProvider::Openai;
        assert!(matches!(
            model_with_keys(&c, None),
            Err(LlmError::Config(_))
        ));
        c.llm_base_url = Some("http://127.0.0.1:11434".into());
        c.llm_model = Some("llama3.1".into());
        let m = model_with_keys(&c, None).map(|m| m.name());
        assert_eq!(m.ok().as_deref(), Some("openai:llama3.1"));
    }
}
