//! The hub's side of a person's prompt and cancel (docs/fairies.md "Prompt", "Cancel"): the one
//! entry point from the HTTP edge into a fairy's work. A prompt names its request, writes the
//! person's message into the fairy's `chat` (before the fairy can answer, so every browser shows
//! the exchange in order) and interrupts the fairy with it; a cancel interrupts it without
//! input. Both are refused for a member of a live project (the user disbands instead). A
//! prompt is refused while the store's disk is full, before anything of it is written.
//!
//! The edge parses and checks what the person sent ([`UserPrompt`]); this module does the rest.
//! (The HTTP route keeps its public word, `prompt`; inside the agent, a prompt is what a model
//! is shown: [`crate::agent::prompt`].)

use crate::agent::host::hub::{FairyHub, HubError};
use crate::agent::modes::Mode;
use crate::agent::state::fairy::{ChatItem, append_chat};
use crate::agent::state::{Interrupt, Request};
use crate::ids::{FairyId, RequestId, RoomName};

/// A person's prompt to one fairy, validated by the HTTP edge.
#[derive(Debug, Clone)]
pub struct UserPrompt {
    /// The request (the message, bounds, selection; its ids, sender and apply mode are set
    /// here).
    pub request: Request,
    /// Who asked (the token's `sub`, for the chat item and the request).
    pub sub: String,
    /// A solo mode to switch the fairy to first.
    pub mode: Option<Mode>,
    /// How this request's canvas actions land (`None`: the fairy's default).
    pub apply: Option<crate::review::ApplyMode>,
}

impl FairyHub {
    /// Prompts the fairy (docs/fairies.md `interrupt({input, mode})`): its current request is
    /// cancelled and it takes this one, whose id is answered. Never refused for being busy;
    /// refused (`FairyInProject`) for a member of a live project; unknown fairy:
    /// `Fairy(NotFound)`.
    pub async fn prompt(
        &self,
        room: &RoomName,
        id: &FairyId,
        prompt: UserPrompt,
    ) -> Result<RequestId, HubError> {
        // A member of a live project answers to its project, not to users (they disband it).
        self.refuse_if_in_project(room, id).await?;
        // A spent budget refuses the prompt before anything of it is written.
        self.check_budget(room, &prompt.sub)?;
        // The person's side of the conversation goes into the fairy's `chat` before the fairy
        // can answer, so every browser shows the exchange in order.
        let request_id = RequestId::random();
        let loaded = self.loaded_room(room).await?;
        // While the store's disk is full nothing of the prompt is written (its chat item would
        // enter the document, fail the room's commit and close its readers' sockets) and no
        // request starts that could not be saved: `507 store_full`, as any write
        // (docs/operations.md "What happens when … the disk fills up").
        loaded.admit_store_write()?;
        let UserPrompt {
            mut request,
            sub,
            mode,
            apply,
        } = prompt;
        request.ids = vec![request_id.clone()];
        request.from_user = Some(sub.clone());
        request.apply = apply;
        let message = request.messages.join("\n\n");
        let item = ChatItem {
            request_id: Some(request_id.clone()),
            ..ChatItem::from_user(&sub, &message)
        };
        append_chat(loaded.doc(), id, &item)?;
        let interrupt = Interrupt {
            input: Some(request),
            mode,
        };
        self.interrupt(room, id, interrupt).await?;
        Ok(request_id)
    }

    /// Cancels what the fairy does, switching it to `mode` if given. Refused
    /// (`FairyInProject`) for a member of a live project; unknown fairy: `Fairy(NotFound)`.
    pub async fn cancel(
        &self,
        room: &RoomName,
        id: &FairyId,
        mode: Option<Mode>,
    ) -> Result<(), HubError> {
        self.refuse_if_in_project(room, id).await?;
        self.interrupt(room, id, Interrupt { input: None, mode })
            .await
    }
}
