//! The hub's side of projects (docs/fairies.md "Projects"): a group prompt creates the project
//! in the room's projects (stored, then shown in the document's `projects`) and interrupts its leader into `orchestrating-active` (3+ fairies) or
//! `duo-orchestrating-active` (2) with the message, and the others into `standing-by`;
//! disbanding aborts the project and interrupts every member to `idling` at once; a user's
//! prompt or cancel to a member of a live project is refused (the user disbands instead).
//!
//! Scaled out, both run on the node hosting the leader, which coordinates the project
//! (`crate::server::forward` sends them there; [`crate::agent::host::hub::remote`] reaches members hosted by
//! other nodes).

use crate::agent::host::hub::{FairyHub, HubError};
use crate::agent::modes::Mode;
use crate::agent::projects::book::CreateError;
use crate::agent::projects::doc::{Member, Project};
use crate::agent::state::fairy::{ChatItem, FairyError, append_chat};
use crate::agent::state::{Interrupt, Request};
use crate::agent::work::{ProjectStatus, Role};
use crate::ids::FairyId;
use crate::ids::ProjectId;
use crate::ids::RoomName;
use crate::origin::TxnOrigin;

/// Longest project title taken from a group prompt's message, in characters.
const MAX_TITLE_CHARS: usize = 80;

/// A group prompt, validated by the HTTP edge.
#[derive(Debug, Clone)]
pub struct GroupPrompt {
    /// The request for the leader (the message, bounds, selection).
    pub request: Request,
    /// The fairies, 2 or more.
    pub fairy_ids: Vec<FairyId>,
    /// The leader (else the first id).
    pub orchestrator_id: Option<FairyId>,
    /// Who asked (for the chat item).
    pub sub: String,
    /// How the members' canvas actions land.
    pub apply: crate::review::ApplyMode,
}

/// A project a group prompt started.
#[derive(Debug, Clone, PartialEq, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProjectStarted {
    /// The project.
    pub project_id: ProjectId,
    /// Its leader.
    pub orchestrator_id: FairyId,
    /// The leader's mode.
    pub mode: Mode,
}

impl FairyHub {
    /// Starts a project (see the module docs). Unknown fairy: `Fairy(NotFound)`; fewer than two
    /// fairies or one already in a live project: `FairyInProject`.
    pub async fn group_prompt(
        &self,
        room: &RoomName,
        prompt: GroupPrompt,
    ) -> Result<ProjectStarted, HubError> {
        let mut ids: Vec<FairyId> = Vec::new();
        for id in prompt.fairy_ids {
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
        if ids.len() < 2 {
            return Err(HubError::FairyInProject(
                "a group prompt needs at least 2 distinct fairies".into(),
            ));
        }
        // A spent budget refuses the project before anything of it is written.
        self.check_budget(room, &prompt.sub)?;
        let leader = prompt.orchestrator_id.unwrap_or_else(|| ids[0].clone());
        if !ids.contains(&leader) {
            return Err(HubError::InvalidGroup(format!(
                "the orchestrator '{leader}' is not one of fairyIds"
            )));
        }
        let loaded = self.loaded_room(room).await?;
        // Nothing of it is written while the store's disk is full (`507 store_full`).
        loaded.admit_store_write()?;
        // Scaled out, a fairy invited a moment ago on another node is looked up in the store.
        for id in &ids {
            if !self.knows(&loaded, id).await? {
                return Err(FairyError::NotFound(id.to_string()).into());
            }
        }
        let duo = ids.len() == 2;
        let leader_role = if duo {
            Role::DuoOrchestrator
        } else {
            Role::Orchestrator
        };
        let members: Vec<Member> = std::iter::once(Member {
            id: leader.clone(),
            role: leader_role,
        })
        .chain(ids.iter().filter(|id| **id != leader).map(|id| Member {
            id: id.clone(),
            role: Role::Drone,
        }))
        .collect();
        let message = prompt.request.messages.join("\n\n");
        let project_id = ProjectId::random();
        let project = Project {
            id: None,
            title: message.chars().take(MAX_TITLE_CHARS).collect(),
            description: message.clone(),
            plan: String::new(),
            orchestrator_id: leader.clone(),
            members,
            color: String::new(),
            status: ProjectStatus::Planning,
            apply: prompt.apply,
        };
        // Checked and created under the book's lock: two group prompts cannot both take a
        // fairy (scaled out, against the other nodes' projects as stored).
        let book = self.fresh_projects(loaded.name()).await?;
        match book.create(loaded.doc(), &project_id, project).await {
            Ok(_) => {}
            Err(CreateError::Busy(busy)) => {
                return Err(HubError::FairyInProject(format!(
                    "fairy '{busy}' is already in a live project"
                )));
            }
            Err(CreateError::Store(error)) => return Err(error.into()),
        }
        append_chat(
            loaded.doc(),
            &leader,
            &ChatItem::from_user(&prompt.sub, &message),
        )?;
        let mode = leader_role.active_mode();
        // The members stand by before the leader starts: a leader that directs a member at
        // once (the offline model answers in a millisecond) must find it standing by, not
        // have its direction overtaken by the stand-by (the member then stood by with its task
        // in progress, and the project never ended).
        for id in ids.iter().filter(|id| **id != leader) {
            let stand_by = Interrupt {
                input: None,
                mode: Some(Mode::StandingBy),
            };
            self.interrupt_anywhere(room, id, stand_by).await?;
        }
        let lead = Interrupt {
            input: Some(prompt.request.clone()),
            mode: Some(mode),
        };
        self.interrupt_anywhere(room, &leader, lead).await?;
        Ok(ProjectStarted {
            project_id,
            orchestrator_id: leader,
            mode,
        })
    }

    /// Disbands a project: aborted, and every member interrupted to idling (its stream
    /// aborted, its tentative action reverted). A project that ended already is left as it is.
    pub async fn disband(&self, room: &RoomName, project_id: &ProjectId) -> Result<(), HubError> {
        let loaded = self.loaded_room(room).await?;
        let book = self.fresh_projects(loaded.name()).await?;
        let mut project = book
            .project(project_id)
            .ok_or_else(|| HubError::ProjectNotFound(project_id.to_string()))?;
        if !project.status.is_live() {
            // Ended already: its former members may be doing something else by now.
            return Ok(());
        }
        if self.inner.leases.is_some() && !self.hosts_here(room, &project.orchestrator_id) {
            // Its coordinator is another node (it moved since the call was routed here).
            return Err(HubError::Moving);
        }
        book.abort(loaded.doc(), TxnOrigin::System, project_id, &mut project);
        for member in &project.members {
            let interrupt = Interrupt {
                input: None,
                mode: Some(Mode::Idling),
            };
            // A member dismissed meanwhile has nothing to stop.
            match self.interrupt_anywhere(room, &member.id, interrupt).await {
                Ok(()) | Err(HubError::Fairy(FairyError::NotFound(_))) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// The leader of live project `project_id`, as this node's store says (where its
    /// disbanding is served, scaled out); `None` for an unknown or ended project.
    pub async fn live_project_leader(
        &self,
        room: &RoomName,
        project_id: &ProjectId,
    ) -> Result<Option<FairyId>, HubError> {
        let book = self.fresh_projects(room).await?;
        Ok(book
            .project(project_id)
            .filter(|p| p.status.is_live())
            .map(|p| p.orchestrator_id))
    }

    /// Refuses a user's prompt or cancel to a member of a live project.
    pub(super) async fn refuse_if_in_project(
        &self,
        room: &RoomName,
        id: &FairyId,
    ) -> Result<(), HubError> {
        let loaded = self.loaded_room(room).await?;
        match self.projects_of(loaded.name()).await?.live_project_of(id) {
            Some(p) => Err(HubError::FairyInProject(format!(
                "fairy '{id}' works in project '{}'; disband the project to stop it",
                p.id.map(|i| i.to_string()).unwrap_or_default()
            ))),
            None => Ok(()),
        }
    }
}
