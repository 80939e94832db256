-- A node's places by kind of session runtime, one key each ('browser', 'context', 'sandbox', and any
-- kind a host registers), instead of a column per kind: a new kind needs no migration. Each node's
-- heartbeat writes it (an empty object, no places: a node leaving or draining). The per-kind columns
-- stay for nodes of the previous version during a rolling deploy, which read and write only those:
-- the two versions do not place sessions on each other's nodes until the roll is done.
ALTER TABLE nodes ADD COLUMN capacities jsonb NOT NULL DEFAULT '{}'
