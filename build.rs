//! Embeds the SQL migrations (`migrations/postgres`, `migrations/sqlite`) into the crate:
//! writes `$OUT_DIR/migrations.rs`, one list per backend of `(file name, include_str!(file))`
//! in file-name order, which `store::sql::migrations` turns into sqlx migrators. This is what
//! `sqlx::migrate!` did, without sqlx's macros crate (a second build of sqlx, SQLite's C
//! sources included, for the compiler's host: docs/benchmarks.md, "CI time"). Cargo rebuilds
//! the crate when a file in `migrations/` changes, is added or is removed.

use std::fmt::Write as _;
use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=migrations");
    let root = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
    let mut out = String::new();
    for (name, dir) in [("POSTGRES", "postgres"), ("SQLITE", "sqlite")] {
        let dir = Path::new(&root).join("migrations").join(dir);
        println!("cargo:rerun-if-changed={}", dir.display());
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .filter(|path| path.is_file() && path.extension().is_some_and(|e| e == "sql"))
            .collect();
        files.sort();
        let _ = writeln!(out, "pub(crate) const {name}: &[(&str, &str)] = &[");
        for path in files {
            let file = path
                .file_name()
                .and_then(|f| f.to_str())
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "    ({file:?}, include_str!({:?})),",
                path.display().to_string()
            );
        }
        let _ = writeln!(out, "];");
    }
    let target =
        Path::new(&std::env::var("OUT_DIR").unwrap_or_else(|_| ".".into())).join("migrations.rs");
    std::fs::write(&target, out).unwrap_or_else(|e| panic!("writing {}: {e}", target.display()));
}
