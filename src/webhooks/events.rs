//! The events POSTed to `--webhook-url` (docs/webhooks.md "Events"): their typed form and
//! their JSON, `{"id", "room", "at", "type", …}`.
//!
//! Owns the event types, their ids and the reading of a logged actor into `{kind, id}`. It
//! knows nothing of delivery, signatures or the store.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// Who wrote the updates a `room.updated` covers: the `kind` and `id` of the actor the room
/// logged (docs/storage.md "History"; `{"kind": "server", "id": "server"}` for the server's own
/// writes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActorRef {
    /// `user`, `fairy` or `server`.
    pub kind: String,
    /// The token's `sub` of a person, a fairy's id, `server`.
    pub id: String,
}

impl ActorRef {
    /// The server's own writes (a new room's schema, mirrors of its records).
    pub fn server() -> Self {
        ActorRef {
            kind: "server".into(),
            id: "server".into(),
        }
    }

    /// The `kind` and `id` of an actor as logged (JSON the server wrote); the server when
    /// there is none or it cannot be read.
    pub fn from_logged(actor: Option<&Arc<str>>) -> Self {
        #[derive(Deserialize)]
        struct Logged {
            kind: String,
            id: String,
        }
        actor
            .and_then(|text| serde_json::from_str::<Logged>(text).ok())
            .map_or_else(Self::server, |a| ActorRef {
                kind: a.kind,
                id: a.id,
            })
    }
}

/// Model tokens a fairy request used, summed over its model calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestUsage {
    /// Model calls the request made (turns and history summaries).
    pub calls: u64,
    /// Prompt tokens billed at the normal rate.
    pub input_tokens: u64,
    /// Generated tokens.
    pub output_tokens: u64,
    /// Prompt tokens read from the provider's cache.
    pub cache_read_input_tokens: u64,
    /// Prompt tokens written to the provider's cache.
    pub cache_creation_input_tokens: u64,
}

/// What happened, with the fields of its kind; `type` names it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum EventData {
    /// Updates were committed to a room (one event per room per debounce window, covering
    /// every update this node committed in it).
    #[serde(rename = "room.updated", rename_all = "camelCase")]
    RoomUpdated {
        /// The first sequence number covered.
        from_seq: u64,
        /// The last sequence number covered.
        to_seq: u64,
        /// Who wrote them (each once).
        actors: Vec<ActorRef>,
    },
    /// A fairy's request ended.
    #[serde(rename = "fairy.request.ended", rename_all = "camelCase")]
    FairyRequestEnded {
        /// The fairy.
        fairy_id: String,
        /// The request (what `…/requests/{requestId}/revert` takes).
        request_id: String,
        /// Why it ended: `done`, `cancelled`, `interrupted`, `rejected`, `error`,
        /// `max-iterations`.
        reason: String,
        /// The model tokens it used.
        usage: RequestUsage,
    },
    /// A fairies' project ended.
    #[serde(rename = "project.ended", rename_all = "camelCase")]
    ProjectEnded {
        /// The project.
        project_id: String,
        /// How: `done` or `aborted`.
        status: String,
    },
}

impl EventData {
    /// The event's `type`.
    pub fn name(&self) -> &'static str {
        match self {
            EventData::RoomUpdated { .. } => "room.updated",
            EventData::FairyRequestEnded { .. } => "fairy.request.ended",
            EventData::ProjectEnded { .. } => "project.ended",
        }
    }
}

/// One event as POSTed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Unique and stable across retries (also the `fairyring-event-id` header): receivers
    /// deduplicate on it.
    pub id: String,
    /// The room it happened in.
    pub room: String,
    /// When the event was made, in milliseconds since the Unix epoch.
    pub at: u64,
    /// What happened.
    #[serde(flatten)]
    pub data: EventData,
}

impl Event {
    /// A new event with a fresh id.
    pub fn new(room: &str, at: u64, data: EventData) -> Self {
        Event {
            id: new_id(),
            room: room.to_owned(),
            at,
            data,
        }
    }
}

/// `evt_` and 32 random hex digits.
pub fn new_id() -> String {
    format!("evt_{:032x}", rand::random::<u128>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_serialize_with_their_type_and_camel_case_fields() {
        let event = Event::new(
            "r",
            5,
            EventData::RoomUpdated {
                from_seq: 3,
                to_seq: 9,
                actors: vec![ActorRef::server()],
            },
        );
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(json["type"], "room.updated");
        assert_eq!(json["fromSeq"], 3);
        assert_eq!(json["toSeq"], 9);
        assert_eq!(json["actors"][0]["kind"], "server");
        assert_eq!(json["room"], "r");
        assert!(json["id"].as_str().unwrap().starts_with("evt_"));
        let back: Event = serde_json::from_value(json).unwrap();
        assert_eq!(back, event);

        let ended = EventData::FairyRequestEnded {
            fairy_id: "f".into(),
            request_id: "q".into(),
            reason: "done".into(),
            usage: RequestUsage {
                calls: 1,
                input_tokens: 2,
                ..RequestUsage::default()
            },
        };
        let json = serde_json::to_value(Event::new("r", 1, ended)).unwrap();
        assert_eq!(json["type"], "fairy.request.ended");
        assert_eq!(json["fairyId"], "f");
        assert_eq!(json["usage"]["inputTokens"], 2);
        let json = serde_json::to_value(Event::new(
            "r",
            1,
            EventData::ProjectEnded {
                project_id: "p".into(),
                status: "done".into(),
            },
        ))
        .unwrap();
        assert_eq!(
            (json["type"].as_str(), json["projectId"].as_str()),
            (Some("project.ended"), Some("p"))
        );
    }

    #[test]
    fn logged_actors_read_as_kind_and_id() {
        let user: Arc<str> = Arc::from(r#"{"kind":"user","id":"ana","name":"Ana"}"#);
        assert_eq!(
            ActorRef::from_logged(Some(&user)),
            ActorRef {
                kind: "user".into(),
                id: "ana".into()
            }
        );
        assert_eq!(ActorRef::from_logged(None), ActorRef::server());
        let broken: Arc<str> = Arc::from("not json");
        assert_eq!(ActorRef::from_logged(Some(&broken)), ActorRef::server());
    }
}
