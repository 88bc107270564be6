//! Node and npm for the tests that build and test the JavaScript packages (`clients/js`,
//! `clients/tldraw`, `web-demo/`): whether Node is there, and one command run in a package's
//! folder with a time limit. Owns nothing of the packages themselves (each test names its folder
//! and steps).

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;

/// Whether `node --version` runs.
pub fn node_present() -> bool {
    std::process::Command::new("node")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs `program args` in `dir` with `envs` added and a time limit; panics with its output if it
/// fails or outlasts the limit, prints it otherwise (shown with `--nocapture`).
pub async fn run_in(
    dir: &Path,
    program: &str,
    args: &[&str],
    envs: &[(&str, &str)],
    limit: Duration,
) {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let what = format!("{program} {}", args.join(" "));
    let child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start `{what}`: {e}"));
    let out = tokio::time::timeout(limit, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("`{what}` did not finish within {limit:?}"))
        .unwrap_or_else(|e| panic!("`{what}` failed to run: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "`{what}` failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    println!("$ {what}\n{stdout}{stderr}");
}
