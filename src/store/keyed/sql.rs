//! The SQL of the keyed side tables, written once for both SQL dialects: SQLite and
//! PostgreSQL take the same texts (`$N` placeholders, `ON CONFLICT … DO UPDATE`, unqualified
//! table names: PostgreSQL finds them through the connection's `search_path`, set to the
//! `--store-schema`). Owns the texts and how a row's room, key and value are bound and read;
//! the backends only choose the connection (their pool, or the group-commit writer's
//! transaction) and run them.

use bytes::Bytes;
use sqlx::query::Query;
use sqlx::{Database, Postgres, Row, Sqlite};

use super::Table;

/// The statements of one table: `$1` is the room, `$2` the key (in a keyed table), then the
/// value.
pub(crate) struct Queries {
    /// One row's value.
    pub get: &'static str,
    /// Every value of a room's rows.
    pub list: &'static str,
    /// Inserts or replaces one row.
    pub upsert: &'static str,
    /// Deletes one row.
    pub delete: &'static str,
}

/// The statements of a table keyed by room and `$key`, with its value in `$value`.
macro_rules! keyed_queries {
    ($table:literal, $key:literal, $value:literal) => {
        Queries {
            get: concat!(
                "SELECT ",
                $value,
                " FROM ",
                $table,
                " WHERE room = $1 AND ",
                $key,
                " = $2"
            ),
            list: concat!("SELECT ", $value, " FROM ", $table, " WHERE room = $1"),
            upsert: concat!(
                "INSERT INTO ",
                $table,
                " (room, ",
                $key,
                ", ",
                $value,
                ") VALUES ($1, $2, $3)
                 ON CONFLICT (room, ",
                $key,
                ") DO UPDATE SET ",
                $value,
                " = excluded.",
                $value
            ),
            delete: concat!(
                "DELETE FROM ",
                $table,
                " WHERE room = $1 AND ",
                $key,
                " = $2"
            ),
        }
    };
}

const FAIRY_STATES: Queries = keyed_queries!("fairy_states", "fairy", "data");
const PROJECTS: Queries = keyed_queries!("projects", "project", "data");
/// Keyed by the room alone: no `$2` key.
const INSTRUCTIONS: Queries = Queries {
    get: "SELECT text FROM room_instructions WHERE room = $1",
    list: "SELECT text FROM room_instructions WHERE room = $1",
    upsert: "INSERT INTO room_instructions (room, text) VALUES ($1, $2)
             ON CONFLICT (room) DO UPDATE SET text = excluded.text",
    delete: "DELETE FROM room_instructions WHERE room = $1",
};

/// The statements of `table`.
pub(crate) fn queries(table: Table) -> &'static Queries {
    match table {
        Table::FairyStates => &FAIRY_STATES,
        Table::Projects => &PROJECTS,
        Table::Instructions => &INSTRUCTIONS,
    }
}

/// A query of `DB` ready to run.
pub(crate) type Statement<DB> = Query<'static, DB, <DB as Database>::Arguments>;

/// What differs between the dialects for these statements: how text and bytes are bound and
/// read (the same calls, on different types).
pub(crate) trait Dialect: Database {
    /// Binds a text.
    fn bind_text(query: Statement<Self>, value: &str) -> Statement<Self>;
    /// Binds bytes.
    fn bind_bytes(query: Statement<Self>, value: &[u8]) -> Statement<Self>;
    /// Reads a text column.
    fn text(row: &Self::Row, column: usize) -> Result<String, sqlx::Error>;
    /// Reads a bytes column.
    fn bytes(row: &Self::Row, column: usize) -> Result<Vec<u8>, sqlx::Error>;
}

macro_rules! dialect {
    ($db:ty) => {
        impl Dialect for $db {
            fn bind_text(query: Statement<Self>, value: &str) -> Statement<Self> {
                query.bind(value)
            }
            fn bind_bytes(query: Statement<Self>, value: &[u8]) -> Statement<Self> {
                query.bind(value)
            }
            fn text(row: &Self::Row, column: usize) -> Result<String, sqlx::Error> {
                row.try_get(column)
            }
            fn bytes(row: &Self::Row, column: usize) -> Result<Vec<u8>, sqlx::Error> {
                row.try_get(column)
            }
        }
    };
}

dialect!(Sqlite);
dialect!(Postgres);

/// `query` with the room and, in a keyed table, the key bound.
fn bind_row<DB: Dialect>(
    table: Table,
    query: &'static str,
    room: &str,
    key: &str,
) -> Statement<DB> {
    let query = DB::bind_text(sqlx::query(query), room);
    if table.keyed() {
        DB::bind_text(query, key)
    } else {
        query
    }
}

/// Reads one row's value.
pub(crate) fn get<DB: Dialect>(table: Table, room: &str, key: &str) -> Statement<DB> {
    bind_row(table, queries(table).get, room, key)
}

/// Reads every value of a room's rows.
pub(crate) fn list<DB: Dialect>(table: Table, room: &str) -> Statement<DB> {
    DB::bind_text(sqlx::query(queries(table).list), room)
}

/// Inserts or replaces one row; a text table's value must be UTF-8.
pub(crate) fn upsert<DB: Dialect>(
    table: Table,
    room: &str,
    key: &str,
    value: &[u8],
) -> Result<Statement<DB>, sqlx::Error> {
    let query = bind_row(table, queries(table).upsert, room, key);
    Ok(if table.text() {
        let text = std::str::from_utf8(value).map_err(|e| sqlx::Error::Encode(e.into()))?;
        DB::bind_text(query, text)
    } else {
        DB::bind_bytes(query, value)
    })
}

/// Deletes one row.
pub(crate) fn delete<DB: Dialect>(table: Table, room: &str, key: &str) -> Statement<DB> {
    bind_row(table, queries(table).delete, room, key)
}

/// The value of a row read by [`get`] or [`list`].
pub(crate) fn value<DB: Dialect>(table: Table, row: &DB::Row) -> Result<Bytes, sqlx::Error> {
    Ok(if table.text() {
        Bytes::from(DB::text(row, 0)?)
    } else {
        Bytes::from(DB::bytes(row, 0)?)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each table's statements name that table and take the parameters the binding gives them.
    #[test]
    fn statements_name_their_table_and_parameters() {
        for table in Table::ALL {
            let q = queries(table);
            for text in [q.get, q.list, q.upsert, q.delete] {
                assert!(text.contains(table.name()), "{text}");
                assert!(!text.contains('?'), "one placeholder style: {text}");
            }
            let keyed = table.keyed();
            assert_eq!(q.get.contains("$2"), keyed, "{}", q.get);
            assert_eq!(q.delete.contains("$2"), keyed, "{}", q.delete);
            assert!(!q.list.contains("$2"));
            assert_eq!(q.upsert.contains("$3"), keyed, "{}", q.upsert);
        }
    }
}
