-- Several nodes: a session's node is the one whose runner holds its browser,
-- recorded when the browser is taken, with the URL other nodes reach it at
-- (a connection that lands elsewhere is relayed there).
ALTER TABLE sessions ADD COLUMN node_url text;
