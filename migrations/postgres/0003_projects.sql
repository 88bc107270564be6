-- A room's projects (docs/fairies.md "Projects"): each project with its tasks, as the agent's
-- JSON. The truth of a project; the document's `projects` and `tasks` roots only mirror it.
CREATE TABLE projects (
    room TEXT NOT NULL,
    project TEXT NOT NULL,
    data BYTEA NOT NULL,
    PRIMARY KEY (room, project)
);
