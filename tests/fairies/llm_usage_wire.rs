//! The usage, cache and cost figures of each provider's wire format (docs/llm.md "Prompt
//! caching"), read from fixtures in `tests/fixtures/wire/` (streams in the shape each
//! provider documents, with cache reads and writes) served byte for byte over loopback HTTP
//! and read through the real provider clients: Anthropic reports uncached input, cache reads
//! and cache writes apart; OpenAI counts cached tokens inside `prompt_tokens`
//! (`prompt_tokens_details.cached_tokens`), DeepSeek as `prompt_cache_hit_tokens`.

use crate::support::llm::{collect, request};
use fairyring::config::{LlmProvider, ServeConfig};
use fairyring::llm::{Usage, model_with_keys};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Serves `fixture` as the SSE body of the first request to the returned base URL.
async fn serve_once(fixture: &str) -> String {
    let body = std::fs::read(format!("tests/fixtures/wire/{fixture}")).expect("fixture");
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move {
        let Ok((mut socket, _)) = listener.accept().await else {
            return;
        };
        // Read the request head and its body before answering.
        let mut seen = Vec::new();
        let mut buf = [0u8; 16 * 1024];
        loop {
            let Ok(n) = socket.read(&mut buf).await else {
                return;
            };
            if n == 0 {
                return;
            }
            seen.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&seen).to_string();
            if let Some(head_end) = text.find("\r\n\r\n") {
                let length = text[..head_end]
                    .lines()
                    .find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        k.eq_ignore_ascii_case("content-length")
                            .then(|| v.trim().parse::<usize>().ok())
                            .flatten()
                    })
                    .unwrap_or(0);
                if seen.len() >= head_end + 4 + length {
                    break;
                }
            }
        }
        let head =
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
        let _ = socket.write_all(head.as_bytes()).await;
        let _ = socket.write_all(&body).await;
        let _ = socket.shutdown().await;
    });
    url
}

async fn usage_of(provider: LlmProvider, model: &str, fixture: &str) -> Usage {
    let mut config = ServeConfig::for_test();
    config.llm = provider;
    config.llm_model = Some(model.into());
    config.llm_base_url = Some(serve_once(fixture).await);
    config.llm_max_retries = 0;
    let model = model_with_keys(&config, Some("key")).expect("model");
    let outcome = collect(model.as_ref(), request()).await;
    assert!(outcome.done(), "{:?}", outcome.error());
    assert_eq!(
        outcome.kept_text(),
        r#"{"actions": [{"_type": "message", "text": "ok"}]}"#
    );
    outcome.last_usage().expect("a usage report")
}

#[tokio::test]
async fn anthropic_reports_uncached_input_cache_reads_and_cache_writes_apart() {
    let usage = usage_of(
        LlmProvider::Anthropic,
        "claude-sonnet-4-5",
        "anthropic_cached.sse",
    )
    .await;
    assert_eq!(
        usage,
        Usage {
            input_tokens: 412,
            output_tokens: 57,
            cache_read_input_tokens: 8120,
            cache_creation_input_tokens: 1530,
        }
    );
}

#[tokio::test]
async fn openai_counts_cached_tokens_inside_the_prompt_tokens() {
    let usage = usage_of(LlmProvider::Openai, "gpt-4.1-mini", "openai_cached.sse").await;
    assert_eq!(
        usage,
        Usage {
            input_tokens: 9650 - 8064,
            output_tokens: 57,
            cache_read_input_tokens: 8064,
            cache_creation_input_tokens: 0,
        }
    );
}

#[tokio::test]
async fn deepseek_reports_its_cache_hits_by_their_own_name() {
    let usage = usage_of(LlmProvider::Openai, "deepseek-chat", "deepseek_cached.sse").await;
    assert_eq!(
        usage,
        Usage {
            input_tokens: 9650 - 8192,
            output_tokens: 57,
            cache_read_input_tokens: 8192,
            cache_creation_input_tokens: 0,
        }
    );
}
