-- A session's charge, on its row, from the ledger's entry for it. The statement that ends a session
-- charges it too (one round trip: the row closed, the charge, its entry, the events and the audit
-- record as parts of one statement), and one statement cannot update the session's row a second
-- time; the entry's trigger runs once that statement is done, and writes what the entry debited.
-- The one writer of `sessions.billed_micro_usd`.
CREATE FUNCTION ledger_entries_bill_session() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE sessions SET billed_micro_usd = -NEW.amount_micro_usd WHERE id = NEW.session_id;
  RETURN NULL;
END $$;

CREATE TRIGGER ledger_entries_bill_session AFTER INSERT ON ledger_entries
  FOR EACH ROW WHEN (NEW.kind = 'session_egress') EXECUTE FUNCTION ledger_entries_bill_session();
