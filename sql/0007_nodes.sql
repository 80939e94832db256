-- Several nodes: each says it is alive every few seconds. A node silent for
-- longer than the loss timeout is lost, and its open sessions end `node_lost`.
CREATE TABLE nodes (
  id text PRIMARY KEY,
  url text NOT NULL,
  last_seen timestamptz NOT NULL
);
