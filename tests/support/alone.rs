//! A test that measures the whole process (its CPU time, its allocations) runs alone in a
//! process of its own: the test binary holds every test of its concern, and the others would
//! run beside it. [`in_own_process`] starts the binary again with only that test and reports
//! its result; owns nothing else.

use std::process::Command;

/// Set, to the test's name, in the process started to run one test alone.
const ALONE: &str = "FAIRYRING_TEST_ALONE";

/// `true` in the process started for the test `name` of `module` (pass `module_path!()`): the
/// caller then runs the test's body. Elsewhere it runs this test binary again with only that
/// test, panics unless it ran and passed there, and returns `false` (the caller returns).
pub fn in_own_process(module: &str, name: &str) -> bool {
    // Test names leave out the crate: `render::export_abandoned` -> `export_abandoned::NAME`.
    let module = module.split_once("::").map_or("", |(_, m)| m);
    let test = if module.is_empty() {
        name.to_owned()
    } else {
        format!("{module}::{name}")
    };
    if std::env::var(ALONE).is_ok_and(|v| v == test) {
        return true;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let out = Command::new(exe)
        .args([test.as_str(), "--exact", "--nocapture", "--test-threads=1"])
        .env(ALONE, &test)
        .output()
        .unwrap_or_else(|e| panic!("cannot run `{test}` in a process of its own: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    eprintln!("{stderr}");
    assert!(
        out.status.success(),
        "`{test}` failed in a process of its own ({})",
        out.status
    );
    assert!(
        stdout.contains("test result: ok. 1 passed"),
        "`{test}` did not run in its own process:\n{stdout}"
    );
    false
}
