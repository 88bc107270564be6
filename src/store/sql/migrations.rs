//! The SQL backends' schema migrations, embedded at build time (`build.rs` lists
//! `migrations/postgres` and `migrations/sqlite`) and turned into sqlx [`Migrator`]s exactly as
//! `sqlx::migrate!` turned them: the same versions, descriptions, checksums (SHA-384 of the
//! file) and transaction choice, so databases migrated by earlier builds are recognised as
//! such. Owns only that list; running the migrators (schemas, missing-version policy) is each
//! backend's opening ([`crate::store::postgres`], [`crate::store::sqlite`]).

use std::borrow::Cow;

use sqlx::SqlSafeStr;
use sqlx::migrate::{Migration, MigrationType, Migrator};

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/migrations.rs"));
}

/// The PostgreSQL store's migrations (`migrations/postgres`).
pub(crate) fn postgres() -> Migrator {
    migrator(embedded::POSTGRES)
}

/// The SQLite store's migrations (`migrations/sqlite`).
pub(crate) fn sqlite() -> Migrator {
    migrator(embedded::SQLITE)
}

/// A migrator over `(file name, SQL)` pairs named as sqlx names them:
/// `<VERSION>_<DESCRIPTION>.sql`, the description's `_` read as spaces; a file whose SQL
/// starts with `-- no-transaction` runs outside a transaction. Names that do not fit are
/// skipped, as sqlx skips them (the test below checks that none is).
fn migrator(files: &'static [(&'static str, &'static str)]) -> Migrator {
    let migrations = files
        .iter()
        .filter_map(|(file, sql)| {
            let (version, rest) = file.split_once('_')?;
            let version: i64 = version.parse().ok()?;
            let migration_type = MigrationType::from_filename(rest);
            let description = rest
                .trim_end_matches(migration_type.suffix())
                .replace('_', " ");
            Some(Migration::new(
                version,
                Cow::Owned(description),
                migration_type,
                sql.into_sql_str(),
                sql.starts_with("-- no-transaction"),
            ))
        })
        .collect();
    Migrator::with_migrations(migrations)
}

/// `all` without the migrations from `version` on: the migrator of a release before them (the
/// backends' upgrade tests build the layouts of earlier releases with it).
#[cfg(test)]
pub(crate) fn before(all: Migrator, version: i64) -> Migrator {
    let mut migrator = all;
    let kept: Vec<_> = migrator
        .migrations
        .iter()
        .filter(|m| m.version < version)
        .cloned()
        .collect();
    migrator.migrations = kept.into();
    migrator
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What sqlx's own resolver reads from the directory (the code `sqlx::migrate!` runs at
    /// compile time), against the embedded list: every file, with the same version,
    /// description, type, checksum and transaction choice.
    async fn same_as_resolved(ours: Migrator, dir: &str) {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("migrations")
            .join(dir);
        let resolved = Migrator::new(path)
            .await
            .unwrap_or_else(|e| panic!("resolving {dir}: {e}"));
        let files = std::fs::read_dir(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("migrations")
                .join(dir),
        )
        .map(|d| d.count())
        .unwrap_or(0);
        assert_eq!(ours.iter().count(), files, "{dir}: every file is embedded");
        assert_eq!(ours.iter().count(), resolved.iter().count(), "{dir}");
        for (a, b) in ours.iter().zip(resolved.iter()) {
            assert_eq!(a.version, b.version, "{dir}");
            assert_eq!(a.description, b.description, "{dir}");
            assert_eq!(a.migration_type, b.migration_type, "{dir}");
            assert_eq!(a.checksum, b.checksum, "{dir}: {}", a.version);
            assert_eq!(a.no_tx, b.no_tx, "{dir}: {}", a.version);
            assert_eq!(a.sql.as_str(), b.sql.as_str(), "{dir}: {}", a.version);
        }
    }

    #[tokio::test]
    async fn embedded_migrations_are_the_directories_as_sqlx_reads_them() {
        same_as_resolved(postgres(), "postgres").await;
        same_as_resolved(sqlite(), "sqlite").await;
    }

    /// A checksum recorded by a database that an earlier build (with `sqlx::migrate!`)
    /// migrated: SHA-384 of the file, as the macro computed it.
    #[test]
    fn checksums_are_sha384_of_the_file() {
        use sha2::{Digest, Sha384};
        let first = postgres();
        let Some(m) = first.iter().next() else {
            panic!("no postgres migration embedded");
        };
        let digest = Sha384::digest(m.sql.as_str());
        assert_eq!(m.checksum.as_ref(), digest.as_slice());
        assert_eq!(m.version, 1);
        assert_eq!(m.description, "rooms");
    }
}
