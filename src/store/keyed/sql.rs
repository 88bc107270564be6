//! The SQL of the keyed side tables, written once for both SQL dialects: SQLite and
//! PostgreSQL take the same texts (`$N` placeholders, `ON CONFLICT … DO UPDATE`, unqualified
//! table names: PostgreSQL finds them through the connection's `search_path`, set to the
//! `--store-schema`). Owns the texts and how a row's room, key and value are bound and read
//! (through [`crate::store::sql::dialect`]); the SQL store only chooses the connection (its
//! pool, or the group-commit writer's transaction) and runs them.

use bytes::Bytes;

use super::Table;
use crate::store::sql::dialect::{Bind, Dialect, Read, Statement, query};

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
const FAIRY_REQUESTS: Queries = keyed_queries!("fairy_requests", "request", "data");
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
        Table::FairyRequests => &FAIRY_REQUESTS,
        Table::Projects => &PROJECTS,
        Table::Instructions => &INSTRUCTIONS,
    }
}

/// `text` with the room and, in a keyed table, the key bound.
fn bind_row<DB: Dialect>(table: Table, text: &'static str, room: &str, key: &str) -> Statement<DB> {
    let statement = query::<DB>(text).text(room);
    if table.keyed() {
        statement.text(key)
    } else {
        statement
    }
}

/// Reads one row's value.
pub(crate) fn get<DB: Dialect>(table: Table, room: &str, key: &str) -> Statement<DB> {
    bind_row(table, queries(table).get, room, key)
}

/// Reads every value of a room's rows.
pub(crate) fn list<DB: Dialect>(table: Table, room: &str) -> Statement<DB> {
    query::<DB>(queries(table).list).text(room)
}

/// Inserts or replaces one row; a text table's value must be UTF-8.
pub(crate) fn upsert<DB: Dialect>(
    table: Table,
    room: &str,
    key: &str,
    value: &[u8],
) -> Result<Statement<DB>, sqlx::Error> {
    let statement = bind_row(table, queries(table).upsert, room, key);
    Ok(if table.text() {
        let text = std::str::from_utf8(value).map_err(|e| sqlx::Error::Encode(e.into()))?;
        statement.text(text)
    } else {
        statement.bytes(value)
    })
}

/// Deletes one row.
pub(crate) fn delete<DB: Dialect>(table: Table, room: &str, key: &str) -> Statement<DB> {
    bind_row(table, queries(table).delete, room, key)
}

/// The value of a row read by [`get`] or [`list`].
pub(crate) fn value(table: Table, row: &impl Read) -> Result<Bytes, sqlx::Error> {
    Ok(if table.text() {
        Bytes::from(row.text(0)?)
    } else {
        Bytes::from(row.bytes(0)?)
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
