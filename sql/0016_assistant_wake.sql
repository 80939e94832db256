-- A session that ends looks up whether it ran an assistant's runtime (to wake the supervisor's
-- sweep): by its id, among the few sessions assistants hold.
CREATE INDEX assistants_session_idx ON assistants (session_id) WHERE session_id IS NOT NULL;
