-- A room's instructions for its fairies (PUT /rooms/{room}/instructions): plain text an admin
-- sets, read into every fairy's system prompt; kept here, never in the document.
CREATE TABLE room_instructions (
    room TEXT PRIMARY KEY,
    text TEXT NOT NULL
);
