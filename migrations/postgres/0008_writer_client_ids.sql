-- The yrs client ids nodes write into room documents with (docs/scaling.md "A room on a node"):
-- each node takes one at start, so that two nodes writing one room at once never make the same
-- item id.
CREATE SEQUENCE writer_client_ids;
