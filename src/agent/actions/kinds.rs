//! Runtime and project actions by kind: the typed names of every non-canvas action a fairy may
//! write, which the modes' table of allowed actions lists ([`crate::agent::modes`]) and the
//! parsers match on ([`super::runtime`], [`super::project`]). A leaf: imports nothing, so the
//! modes can name actions without depending on what carrying them out needs.

/// The project actions by kind (one per `ProjectAction` variant of [`super::project`]), for what a mode allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProjectKind {
    /// `start-project`.
    StartProject,
    /// `create-project-task`.
    CreateProjectTask,
    /// `direct-to-start-project-task`.
    DirectToStartProjectTask,
    /// `await-tasks-completion`.
    AwaitTasksCompletion,
    /// `end-project`.
    EndProject,
    /// `abort-project`.
    AbortProject,
    /// `mark-drone-task-done`.
    MarkDroneTaskDone,
    /// `start-duo-project`.
    StartDuoProject,
    /// `create-duo-task`.
    CreateDuoTask,
    /// `direct-to-start-duo-task`.
    DirectToStartDuoTask,
    /// `start-duo-task`.
    StartDuoTask,
    /// `mark-duo-task-done`.
    MarkDuoTaskDone,
    /// `await-duo-tasks-completion`.
    AwaitDuoTasksCompletion,
    /// `end-duo-project`.
    EndDuoProject,
}

impl ProjectKind {
    /// Every project action, in the order of their schemas.
    pub const ALL: [ProjectKind; 14] = [
        ProjectKind::StartProject,
        ProjectKind::CreateProjectTask,
        ProjectKind::DirectToStartProjectTask,
        ProjectKind::AwaitTasksCompletion,
        ProjectKind::EndProject,
        ProjectKind::AbortProject,
        ProjectKind::MarkDroneTaskDone,
        ProjectKind::StartDuoProject,
        ProjectKind::CreateDuoTask,
        ProjectKind::DirectToStartDuoTask,
        ProjectKind::StartDuoTask,
        ProjectKind::MarkDuoTaskDone,
        ProjectKind::AwaitDuoTasksCompletion,
        ProjectKind::EndDuoProject,
    ];

    /// The `_type` the model writes.
    pub fn name(self) -> &'static str {
        match self {
            ProjectKind::StartProject => "start-project",
            ProjectKind::CreateProjectTask => "create-project-task",
            ProjectKind::DirectToStartProjectTask => "direct-to-start-project-task",
            ProjectKind::AwaitTasksCompletion => "await-tasks-completion",
            ProjectKind::EndProject => "end-project",
            ProjectKind::AbortProject => "abort-project",
            ProjectKind::MarkDroneTaskDone => "mark-drone-task-done",
            ProjectKind::StartDuoProject => "start-duo-project",
            ProjectKind::CreateDuoTask => "create-duo-task",
            ProjectKind::DirectToStartDuoTask => "direct-to-start-duo-task",
            ProjectKind::StartDuoTask => "start-duo-task",
            ProjectKind::MarkDuoTaskDone => "mark-duo-task-done",
            ProjectKind::AwaitDuoTasksCompletion => "await-duo-tasks-completion",
            ProjectKind::EndDuoProject => "end-duo-project",
        }
    }

    /// The project action named `name`.
    pub fn parse(name: &str) -> Option<ProjectKind> {
        ProjectKind::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// The solo runtime actions by kind (one per `SoloAction` variant of [`super::runtime`]), for what a mode allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SoloKind {
    /// `message`.
    Message,
    /// `think`.
    Think,
    /// `review`.
    Review,
    /// `upsert-personal-todo`.
    UpsertPersonalTodo,
    /// `fly-to-bounds`.
    FlyToBounds,
    /// `create-solo-task`.
    CreateSoloTask,
    /// `start-solo-task`.
    StartSoloTask,
    /// `mark-solo-task-done`.
    MarkSoloTaskDone,
}

impl SoloKind {
    /// Every solo action, in the order of their schemas.
    pub const ALL: [SoloKind; 8] = [
        SoloKind::Message,
        SoloKind::Think,
        SoloKind::Review,
        SoloKind::UpsertPersonalTodo,
        SoloKind::FlyToBounds,
        SoloKind::CreateSoloTask,
        SoloKind::StartSoloTask,
        SoloKind::MarkSoloTaskDone,
    ];

    /// The `_type` the model writes.
    pub fn name(self) -> &'static str {
        match self {
            SoloKind::Message => "message",
            SoloKind::Think => "think",
            SoloKind::Review => "review",
            SoloKind::UpsertPersonalTodo => "upsert-personal-todo",
            SoloKind::FlyToBounds => "fly-to-bounds",
            SoloKind::CreateSoloTask => "create-solo-task",
            SoloKind::StartSoloTask => "start-solo-task",
            SoloKind::MarkSoloTaskDone => "mark-solo-task-done",
        }
    }

    /// The solo action named `name`.
    pub fn parse(name: &str) -> Option<SoloKind> {
        SoloKind::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// A runtime (non-canvas) action by kind: what a mode's table of allowed actions lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RuntimeKind {
    /// A solo action.
    Solo(SoloKind),
    /// A project action.
    Project(ProjectKind),
}

impl RuntimeKind {
    /// The `_type` the model writes.
    pub fn name(self) -> &'static str {
        match self {
            RuntimeKind::Solo(kind) => kind.name(),
            RuntimeKind::Project(kind) => kind.name(),
        }
    }

    /// The runtime action named `name` (`None`: a canvas action or no action at all).
    pub fn parse(name: &str) -> Option<RuntimeKind> {
        SoloKind::parse(name)
            .map(RuntimeKind::Solo)
            .or_else(|| ProjectKind::parse(name).map(RuntimeKind::Project))
    }
}
