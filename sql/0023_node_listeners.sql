-- Where other nodes reach each node's runner (its RUNNER_ADDRESS): with its url, a port no session's
-- page or sandbox may reach, whatever EGRESS_ALLOW_CIDRS opens.
ALTER TABLE nodes ADD COLUMN runner_address text;
