//! Who wrote an update (docs/storage.md "History"): the actor logged with every committed update
//! and answered by `GET /rooms/{room}/history`.
//!
//! Owns the [`Actor`] type and its JSON form only: the vocabulary shared by the room, which
//! logs an actor with every update it commits, and the history, which reads them back (a leaf:
//! it imports nothing of the crate, so neither depends on the other for it). The identities in it come from the server's
//! own records (a token's verified claims, a fairy's running request), never from the document
//! or awareness, which every peer can write.

use serde::{Deserialize, Serialize};

/// Who wrote an update, as far as rollback needs it.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, utoipa::ToSchema,
)]
pub struct ActorKey {
    /// A person, a fairy or the server itself.
    pub kind: ActorKind,
    /// The person's subject, the fairy's id; anything for the server.
    pub id: String,
}

/// The kinds of writers.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, utoipa::ToSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum ActorKind {
    /// A person (a peer's update).
    User,
    /// A fairy (the agent runtime).
    Fairy,
    /// The server (schema initialisation, mirrors).
    Server,
}

/// How the server wrote an update on a person's behalf.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Via {
    /// `POST /rooms/{room}/restore`.
    Restore,
    /// `POST /rooms/{room}/rollback`.
    Rollback,
    /// A write through the HTTP API.
    Api,
}

/// The author of a logged update. (The fields' camelCase names are also spelled out one by
/// one: utoipa's schema does not follow `rename_all_fields`.)
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(
    tag = "kind",
    rename_all = "lowercase",
    rename_all_fields = "camelCase"
)]
pub enum Actor {
    /// A person: the token's `sub` and `name`; `via` when the server wrote for them.
    User {
        /// The token's `sub`.
        id: String,
        /// The token's `name`, when it has one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        /// How the server wrote it for them (a restore, a rollback, an API write).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        via: Option<Via>,
    },
    /// A fairy working on a request.
    Fairy {
        /// The fairy's id.
        id: String,
        /// The request it was working on.
        #[serde(rename = "requestId")]
        request_id: String,
        /// The `sub` of the person who prompted it.
        #[serde(rename = "promptedBy")]
        prompted_by: String,
        /// The model answering the request.
        model: String,
        /// The project it works in, if any.
        #[serde(default, skip_serializing_if = "Option::is_none", rename = "projectId")]
        project_id: Option<String>,
        /// Its task in that project, if any.
        #[serde(default, skip_serializing_if = "Option::is_none", rename = "taskId")]
        task_id: Option<String>,
        /// The `sub` of the person who accepted the fairy's suggestion this update applies
        /// (review mode; README "Review mode").
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            rename = "acceptedBy"
        )]
        accepted_by: Option<String>,
    },
    /// The server on its own (a new room's schema, mirrors of its records, migrations).
    Server {
        /// Always `server`.
        id: String,
    },
}

impl Actor {
    /// A person.
    pub fn user(sub: impl Into<String>, name: Option<String>) -> Self {
        Actor::User {
            id: sub.into(),
            name,
            via: None,
        }
    }

    /// The server on its own: what an update logged without an actor is shown as.
    pub fn server() -> Self {
        Actor::Server {
            id: "server".to_owned(),
        }
    }

    /// This person, written for by the server `via` something.
    pub fn via(self, how: Via) -> Self {
        match self {
            Actor::User { id, name, .. } => Actor::User {
                id,
                name,
                via: Some(how),
            },
            other => other,
        }
    }

    /// Whether this is a person's restore (`POST …/restore`), whose update keeps the original
    /// actors of what it brings back (see [`crate::history::replay::Rollback::record_restore`]).
    pub fn is_restore(&self) -> bool {
        matches!(
            self,
            Actor::User {
                via: Some(Via::Restore),
                ..
            }
        )
    }

    /// The id (a `sub`, a fairy id, `server`).
    pub fn id(&self) -> &str {
        match self {
            Actor::User { id, .. } | Actor::Fairy { id, .. } | Actor::Server { id } => id,
        }
    }

    /// Who this is, as rollback names actors: kind and id.
    pub fn key(&self) -> ActorKey {
        let kind = match self {
            Actor::User { .. } => ActorKind::User,
            Actor::Fairy { .. } => ActorKind::Fairy,
            Actor::Server { .. } => ActorKind::Server,
        };
        ActorKey {
            kind,
            id: self.id().to_owned(),
        }
    }

    /// The JSON text logged with an update.
    pub fn to_json(&self) -> std::sync::Arc<str> {
        // Serialising these plain fields cannot fail; an empty object is never logged for real.
        serde_json::to_string(self)
            .unwrap_or_else(|_| "{}".to_owned())
            .into()
    }

    /// Reads a logged actor; `None` for text this server did not write.
    pub fn from_json(text: &str) -> Option<Self> {
        serde_json::from_str(text).ok()
    }

    /// Whether two actors are the same one for grouping history (same kind and id, and for a
    /// fairy the same request; `via` apart).
    pub fn same_author(&self, other: &Actor) -> bool {
        match (self, other) {
            (Actor::User { id: a, via: va, .. }, Actor::User { id: b, via: vb, .. }) => {
                a == b && va == vb
            }
            (
                Actor::Fairy {
                    id: a,
                    request_id: ra,
                    ..
                },
                Actor::Fairy {
                    id: b,
                    request_id: rb,
                    ..
                },
            ) => a == b && ra == rb,
            (Actor::Server { .. }, Actor::Server { .. }) => true,
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actors_have_the_documented_json() {
        let user = Actor::user("u-1", Some("Ada".into()));
        assert_eq!(
            serde_json::to_value(&user).unwrap(),
            serde_json::json!({"kind": "user", "id": "u-1", "name": "Ada"})
        );
        assert_eq!(
            serde_json::to_value(user.clone().via(Via::Restore)).unwrap(),
            serde_json::json!({"kind": "user", "id": "u-1", "name": "Ada", "via": "restore"})
        );
        let fairy = Actor::Fairy {
            id: "f-1".into(),
            request_id: "r-1".into(),
            prompted_by: "u-1".into(),
            model: "offline".into(),
            project_id: Some("p-1".into()),
            task_id: None,
            accepted_by: None,
        };
        assert_eq!(
            serde_json::to_value(&fairy).unwrap(),
            serde_json::json!({"kind": "fairy", "id": "f-1", "requestId": "r-1",
                "promptedBy": "u-1", "model": "offline", "projectId": "p-1"})
        );
        assert_eq!(Actor::from_json(&fairy.to_json()), Some(fairy.clone()));
        assert_eq!(
            Actor::from_json(r#"{"kind":"server","id":"server"}"#),
            Some(Actor::server())
        );
        assert_eq!(Actor::from_json("not json"), None);
        assert!(!fairy.same_author(&user));
    }
}
