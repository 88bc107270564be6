//! Rebuilds the crate when a migration changes: `sqlx::migrate!` embeds `migrations/postgres`
//! and `migrations/sqlite` at compile time, and cargo would not notice an edit there.

fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
