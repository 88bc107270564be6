//! What differs between the two SQL dialects, and typed access to both drivers.
//!
//! Owns the [`Dialect`] trait, implemented by sqlx's [`sqlx::Sqlite`] (in `store::sqlite`) and
//! [`sqlx::Postgres`] (in `store::postgres`): the few statements whose text differs (a read
//! snapshot, the snapshot upsert, the outbox's claim and due time) and typed binding, reading
//! and executors. The typed part is the same calls on each driver's own types, written once in
//! [`typed_access!`] and compiled per driver: the shared implementation ([`super::SqlStore`]) is
//! generic over the dialect and monomorphised, so a query costs what it costs written against
//! the driver by hand (no `Any` driver, no boxing per row or per bind). It knows no table but
//! those the statements it holds name.

use sqlx::IntoArguments;
use sqlx::query::Query;
use sqlx::{Database, Executor, Pool};

/// A query of `DB` ready to run, its values bound as it is built.
pub type Statement<DB> = Query<'static, DB, <DB as Database>::Arguments>;

/// A SQL dialect the shared store runs on: sqlx's database type, with its rows readable through
/// [`Read`], plus what its SQL spells differently.
pub trait Dialect: Database<Arguments: IntoArguments<Self>, Row: Read> {
    /// Run first in a read transaction that must see one state of the database (a load, a
    /// version): PostgreSQL's default isolation lets each statement see a newer state; SQLite's
    /// deferred transaction reads one snapshot of the WAL already.
    const READ_SNAPSHOT: Option<&'static str>;

    /// Replaces a room's snapshot (`$1` room, `$2` seq, `$3` data) unless it holds a newer one.
    const KEEP_SNAPSHOT: &'static str;

    /// Claims due outbox rows: `$1` lease end, `$2` now, `$3` limit; returns `id, body,
    /// attempts, next_at` (see [`crate::store::outbox::Outbox::claim`]).
    const CLAIM: &'static str;

    /// When the earliest live outbox event is due (its next attempt or the end of its claim).
    const NEXT_DUE: &'static str;

    /// Binds an integer.
    fn bind_int(query: Statement<Self>, value: i64) -> Statement<Self>;
    /// Binds an integer or `NULL`.
    fn bind_opt_int(query: Statement<Self>, value: Option<i64>) -> Statement<Self>;
    /// Binds a count kept in an `INTEGER` column (an outbox event's attempts): 64 bits in
    /// SQLite, 32 in PostgreSQL.
    fn bind_count(query: Statement<Self>, value: u32) -> Statement<Self>;
    /// Binds a text.
    fn bind_text(query: Statement<Self>, value: &str) -> Statement<Self>;
    /// Binds bytes.
    fn bind_bytes(query: Statement<Self>, value: &[u8]) -> Statement<Self>;
    /// How many rows a statement changed.
    fn rows_affected(result: &Self::QueryResult) -> u64;
    /// The pool as an executor.
    fn pool<'p>(pool: &'p Pool<Self>) -> impl Executor<'p, Database = Self> + 'p;
    /// A connection (a transaction's, the writer's) as an executor.
    fn on<'c>(conn: &'c mut Self::Connection) -> impl Executor<'c, Database = Self> + 'c;
}

/// The columns of a row, typed (the same calls on each driver's row).
pub trait Read {
    /// An integer column.
    fn int(&self, column: usize) -> Result<i64, sqlx::Error>;
    /// An integer column that may be `NULL`.
    fn opt_int(&self, column: usize) -> Result<Option<i64>, sqlx::Error>;
    /// A count kept in an `INTEGER` column (see [`Dialect::bind_count`]).
    fn count(&self, column: usize) -> Result<i64, sqlx::Error>;
    /// A text column.
    fn text(&self, column: usize) -> Result<String, sqlx::Error>;
    /// A text column that may be `NULL`.
    fn opt_text(&self, column: usize) -> Result<Option<String>, sqlx::Error>;
    /// A bytes column.
    fn bytes(&self, column: usize) -> Result<Vec<u8>, sqlx::Error>;
}

/// Binding as a chain of calls on a statement: `D::query(TEXT).text(room).int(seq)`.
pub trait Bind: Sized {
    /// See [`Dialect::bind_int`].
    fn int(self, value: i64) -> Self;
    /// See [`Dialect::bind_opt_int`].
    fn opt_int(self, value: Option<i64>) -> Self;
    /// See [`Dialect::bind_count`].
    fn count(self, value: u32) -> Self;
    /// See [`Dialect::bind_text`].
    fn text(self, value: &str) -> Self;
    /// See [`Dialect::bind_bytes`].
    fn bytes(self, value: &[u8]) -> Self;
}

impl<D: Dialect> Bind for Statement<D> {
    fn int(self, value: i64) -> Self {
        D::bind_int(self, value)
    }
    fn opt_int(self, value: Option<i64>) -> Self {
        D::bind_opt_int(self, value)
    }
    fn count(self, value: u32) -> Self {
        D::bind_count(self, value)
    }
    fn text(self, value: &str) -> Self {
        D::bind_text(self, value)
    }
    fn bytes(self, value: &[u8]) -> Self {
        D::bind_bytes(self, value)
    }
}

/// A statement of dialect `D` from a text of the store's own (never built from input).
pub fn query<D: Dialect>(text: &'static str) -> Statement<D> {
    sqlx::query(text)
}

/// The typed part of a [`Dialect`] implementation and the driver's [`Read`]: the same calls on
/// the driver's own types. `$row` is the driver's row type; `$count` the Rust type of its
/// `INTEGER`.
macro_rules! typed_access {
    (row: $row:ty, count: $count:ty) => {
        impl $crate::store::sql::dialect::Read for $row {
            fn int(&self, column: usize) -> Result<i64, sqlx::Error> {
                sqlx::Row::try_get(self, column)
            }
            fn opt_int(&self, column: usize) -> Result<Option<i64>, sqlx::Error> {
                sqlx::Row::try_get(self, column)
            }
            fn count(&self, column: usize) -> Result<i64, sqlx::Error> {
                sqlx::Row::try_get::<$count, _>(self, column).map(i64::from)
            }
            fn text(&self, column: usize) -> Result<String, sqlx::Error> {
                sqlx::Row::try_get(self, column)
            }
            fn opt_text(&self, column: usize) -> Result<Option<String>, sqlx::Error> {
                sqlx::Row::try_get(self, column)
            }
            fn bytes(&self, column: usize) -> Result<Vec<u8>, sqlx::Error> {
                sqlx::Row::try_get(self, column)
            }
        }
    };
    (count: $count:ty) => {
        fn bind_int(
            query: $crate::store::sql::dialect::Statement<Self>,
            value: i64,
        ) -> $crate::store::sql::dialect::Statement<Self> {
            query.bind(value)
        }
        fn bind_opt_int(
            query: $crate::store::sql::dialect::Statement<Self>,
            value: Option<i64>,
        ) -> $crate::store::sql::dialect::Statement<Self> {
            query.bind(value)
        }
        fn bind_count(
            query: $crate::store::sql::dialect::Statement<Self>,
            value: u32,
        ) -> $crate::store::sql::dialect::Statement<Self> {
            query.bind(<$count>::try_from(value).unwrap_or(<$count>::MAX))
        }
        fn bind_text(
            query: $crate::store::sql::dialect::Statement<Self>,
            value: &str,
        ) -> $crate::store::sql::dialect::Statement<Self> {
            query.bind(value)
        }
        fn bind_bytes(
            query: $crate::store::sql::dialect::Statement<Self>,
            value: &[u8],
        ) -> $crate::store::sql::dialect::Statement<Self> {
            query.bind(value)
        }
        fn rows_affected(result: &Self::QueryResult) -> u64 {
            result.rows_affected()
        }
        fn pool<'p>(pool: &'p sqlx::Pool<Self>) -> impl sqlx::Executor<'p, Database = Self> + 'p {
            pool
        }
        fn on<'c>(conn: &'c mut Self::Connection) -> impl sqlx::Executor<'c, Database = Self> + 'c {
            conn
        }
    };
}

pub(crate) use typed_access;
