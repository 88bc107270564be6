//! Transaction origins: who authored a change to a room's document.
//!
//! Every transaction on a room document carries an origin so that fairies can tell their own
//! changes from users' and other fairies'. The wire form is a UTF-8 string stored in the yrs
//! [`yrs::Origin`] bytes: `client:CONN:SUB` for a WebSocket connection authenticated as `SUB`,
//! `fairy:ID` for a fairy, `system` for the server itself (schema initialisation, compaction).
//! This module owns only that encoding; it does not know about rooms or documents.

use std::fmt;

/// The author of a document transaction.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TxnOrigin {
    /// A peer connected over WebSocket: the connection id and the user's `sub` claim.
    Client { conn: u64, sub: String },
    /// A fairy living in the server.
    Fairy { id: String },
    /// The server itself (new-room schema, migrations).
    System,
}

impl TxnOrigin {
    /// The origin of a fairy's transactions.
    pub fn fairy(id: impl Into<String>) -> Self {
        TxnOrigin::Fairy { id: id.into() }
    }

    /// Parses the origin bytes of a transaction; `None` for origins this server did not write
    /// (for example an `UndoManager`'s own origin).
    pub fn parse(origin: &yrs::Origin) -> Option<Self> {
        let text = std::str::from_utf8(origin.as_ref()).ok()?;
        Self::parse_str(text)
    }

    /// Parses the string form (`client:CONN:SUB`, `fairy:ID`, `system`).
    pub fn parse_str(text: &str) -> Option<Self> {
        if text == "system" {
            return Some(TxnOrigin::System);
        }
        if let Some(id) = text.strip_prefix("fairy:") {
            return Some(TxnOrigin::Fairy { id: id.to_owned() });
        }
        let rest = text.strip_prefix("client:")?;
        let (conn, sub) = rest.split_once(':')?;
        Some(TxnOrigin::Client {
            conn: conn.parse().ok()?,
            sub: sub.to_owned(),
        })
    }

    /// True for changes made by people (WebSocket peers), as opposed to fairies or the server.
    pub fn is_user(&self) -> bool {
        matches!(self, TxnOrigin::Client { .. })
    }
}

impl fmt::Display for TxnOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TxnOrigin::Client { conn, sub } => write!(f, "client:{conn}:{sub}"),
            TxnOrigin::Fairy { id } => write!(f, "fairy:{id}"),
            TxnOrigin::System => f.write_str("system"),
        }
    }
}

impl From<&TxnOrigin> for yrs::Origin {
    fn from(origin: &TxnOrigin) -> Self {
        yrs::Origin::from(origin.to_string().as_bytes())
    }
}

impl From<TxnOrigin> for yrs::Origin {
    fn from(origin: TxnOrigin) -> Self {
        (&origin).into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_kind() {
        for o in [
            TxnOrigin::Client {
                conn: 7,
                sub: "alice:with:colons".into(),
            },
            TxnOrigin::fairy("f1"),
            TxnOrigin::System,
        ] {
            let y: yrs::Origin = (&o).into();
            assert_eq!(TxnOrigin::parse(&y), Some(o));
        }
    }

    #[test]
    fn foreign_origins_are_none() {
        assert_eq!(TxnOrigin::parse_str("client:x:y"), None);
        assert_eq!(TxnOrigin::parse_str("undo"), None);
    }
}
