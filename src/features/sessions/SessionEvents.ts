import { WebhookOutbox } from "../webhooks/Outbox.ts"
import { SessionHooks } from "./SessionLifecycle.ts"
import type { SessionRow } from "./SessionsRepo.ts"

// A session's webhook events: `session.created` where it is inserted
// (`CreateSession`), the others in the transaction of each transition.

/** The `data` of a session event: the session as its row says at the change. */
export const sessionData = (row: SessionRow) => ({
  id: row.id,
  session_type: row.session_type,
  status: row.status,
  region: row.region,
  created_at: row.created_at.toISOString(),
  ready_at: row.ready_at?.toISOString() ?? null,
  expires_at: row.expires_at.toISOString(),
  ended_at: row.ended_at?.toISOString() ?? null,
  ended_reason: row.ended_reason,
  bytes_up: Number(row.bytes_up),
  bytes_down: Number(row.bytes_down),
  metadata: row.metadata
})

/** `session.ready`, `session.closed` and `session.error`, in the transaction of each transition. */
export const layerHooks = SessionHooks.add(
  WebhookOutbox.useSync((outbox) => ({
    ready: [(row: SessionRow) => outbox.emit(row.account_id, "session.ready", sessionData(row))],
    ended: [
      (row: SessionRow) =>
        outbox.emit(
          row.account_id,
          row.status === "error" ? "session.error" : "session.closed",
          sessionData(row)
        )
    ]
  }))
)
