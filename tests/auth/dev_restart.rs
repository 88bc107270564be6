//! `serve --dev` survives a restart (issue 47): the dev secret is kept in the store, so a token
//! minted before a restart on the same SQLite file still opens rooms after it, instead of
//! every open page getting `bad_signature`. And no token, accepted or refused, appears in the
//! server's log (at `debug`), whether it came as `Authorization: Bearer` or as `?token=`.
//!
//! The real binary, twice, on one SQLite file; its log captured from stderr.

use std::io::BufRead;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

/// A token signed with a secret this server never had (HS256 header, `sub: mallory`).
const FORGED: &str = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJtYWxsb3J5IiwiZXhwIjo0MTAyNDQ0ODAwfQ.Zm9yZ2VkLXNpZ25hdHVyZS10aGF0LXdpbGwtbm90LXZlcmlmeQ";

struct Serve {
    child: Child,
    http: String,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `fairyring serve --dev` on `store`, its log (stderr, `RUST_LOG=debug`) written to `log`.
fn serve(store: &str, log: &Path) -> Serve {
    let mut child = Command::new(env!("CARGO_BIN_EXE_fairyring"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--dev",
            "--store",
            store,
        ])
        .env("RUST_LOG", "debug")
        .env_remove("FAIRYRING_JWT_SECRET")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(log).expect("log file"))
        .spawn()
        .expect("spawn fairyring");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    std::io::BufReader::new(stdout)
        .read_line(&mut line)
        .expect("first line");
    let http = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("listening line, got {line:?}"))
        .to_owned();
    Serve { child, http }
}

async fn dev_token(http: &str) -> String {
    let response = reqwest::Client::new()
        .post(format!("{http}/auth/dev-token"))
        .json(&json!({"name": "Ada"}))
        .send()
        .await
        .expect("dev-token");
    assert_eq!(response.status().as_u16(), 200);
    let body: Value = response.json().await.expect("json");
    body["token"].as_str().expect("token").to_owned()
}

/// `GET /rooms/dev-room/history` with `token` as a bearer (or as `?token=`): status and error code.
async fn read_history(http: &str, token: &str, in_query: bool) -> (u16, String) {
    let client = reqwest::Client::new();
    let request = if in_query {
        client.get(format!("{http}/rooms/dev-room/history?token={token}"))
    } else {
        client
            .get(format!("{http}/rooms/dev-room/history"))
            .bearer_auth(token)
    };
    let response = request.send().await.expect("history");
    let status = response.status().as_u16();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    (
        status,
        body["error"].as_str().unwrap_or_default().to_owned(),
    )
}

/// Whether `token` (or its signature, its most secret part) appears in `log`.
fn leaks(log: &str, token: &str) -> bool {
    let signature = token.rsplit('.').next().unwrap_or(token);
    log.contains(token) || log.contains(signature)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_tokens_outlive_a_restart_and_no_token_is_logged() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = format!("sqlite:{}", dir.path().join("dev.db").display());
    let logs = [dir.path().join("first.log"), dir.path().join("second.log")];

    let first = serve(&store, &logs[0]);
    let token = dev_token(&first.http).await;
    // A room never written answers 404 `room_not_found` or an empty history: either way the
    // token was accepted.
    let accepted = |(status, error): (u16, String)| {
        (status == 200 && error.is_empty()) || error == "room_not_found"
    };
    assert!(accepted(read_history(&first.http, &token, false).await));
    for in_query in [false, true] {
        let (status, error) = read_history(&first.http, FORGED, in_query).await;
        assert_eq!((status, error.as_str()), (401, "bad_signature"));
    }
    drop(first);

    // The same store again: the page's token still works, as a bearer and as `?token=`.
    let second = serve(&store, &logs[1]);
    for in_query in [false, true] {
        let answer = read_history(&second.http, &token, in_query).await;
        assert!(
            accepted(answer.clone()),
            "a token minted before the restart is refused after it: {answer:?}"
        );
    }
    let (status, error) = read_history(&second.http, FORGED, true).await;
    assert_eq!((status, error.as_str()), (401, "bad_signature"));
    drop(second);

    for log in &logs {
        let text = std::fs::read_to_string(log).expect("log");
        assert!(text.contains("DEV MODE"), "the log was captured: {text}");
        assert!(
            !leaks(&text, &token),
            "the dev token is in the log:\n{text}"
        );
        assert!(
            !leaks(&text, FORGED),
            "a refused token is in the log:\n{text}"
        );
    }
}
