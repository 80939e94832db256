import { SessionsConfig } from "./SessionsConfig.ts"
/**
 * The use cases on one session of the owner's once it exists: ending it, and
 * what reaches its runtime (a screenshot, a page action, a resize, the live
 * view's token). Each reads the row first and answers not-found, not-ready
 * and not-open from it (a close of a session live on this node needs no read);
 * the actor's "gone" is answered from the row again.
 */
import { Clock, Effect, Option } from "effect"
import type { PageAction } from "../../runtime/Drive.ts"
import {
  type SessionNotFound,
  SessionNotOpen,
  SessionNotReady,
  SessionTypeMismatch
} from "../../kernel/Errors.ts"
import type { PreviewToken, ResizeRequest } from "../../kernel/Session.ts"
import {
  type ComputerAnswer,
  type ComputerRequest,
  MAX_ACTIONS,
  OutOfViewport
} from "../../kernel/Computer.ts"
import { InvalidField } from "../../kernel/Errors.ts"
import { type Capability, SessionKinds } from "../../runtime/SessionKinds.ts"
import { PREVIEW_FPS } from "../../runtime/Frames.ts"
import { PreviewTokens } from "./PreviewTokens.ts"
import { SessionActors } from "./SessionActors.ts"
import { type Owner, permits } from "../../kernel/Owner.ts"
import { Audit } from "../audit/Audit.ts"
import { CurrentOrigin } from "../policy/AuthMiddleware.ts"
import type { SessionRow } from "./SessionsRepo.ts"
import type { SessionAddress } from "../../platform/cluster/SessionAddress.ts"
import { NodeConfig } from "../../platform/config/Config.ts"
import { LiveSessions } from "../../runtime/LiveSessions.ts"

const now = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis))

const addressOfRow = (row: SessionRow): SessionAddress => ({ id: row.id, nodeId: row.node_id })

/** `find` reads the owner's row (`Sessions.get`'s); `previewBase` is the live view's stream. */
export const make = (
  find: (owner: Owner, id: string) => Effect.Effect<SessionRow, SessionNotFound>,
  previewBase: (id: string) => string
) =>
  Effect.gen(function* () {
    const config = yield* SessionsConfig
    const actors = yield* SessionActors
    const audit = yield* Audit
    const previewTokens = yield* PreviewTokens
    const kinds = yield* SessionKinds
    const liveSessions = yield* LiveSessions
    const nodeId = (yield* NodeConfig).nodeId

    /** The session must be `ready`: 409 not_ready while creating, not_open once ended. */
    const ready = (row: SessionRow): Effect.Effect<SessionRow, SessionNotReady | SessionNotOpen> =>
      row.status === "creating"
        ? Effect.fail(new SessionNotReady())
        : row.status === "ready"
          ? Effect.succeed(row)
          : Effect.fail(new SessionNotOpen())
    const findReady = (owner: Owner, id: string) => Effect.flatMap(find(owner, id), ready)

    /**
     * Where to send the owner's close: a session of theirs live on this node is its actor here, with
     * no read (it was open a moment ago; should it end first, the actor answers so and the caller
     * gets what the row would have said, not_open). Any other is read: not found, ended, elsewhere.
     */
    const closing = (
      owner: Owner,
      id: string
    ): Effect.Effect<SessionAddress, SessionNotFound | SessionNotOpen> => {
      const live = liveSessions.get(id)
      if (Option.isSome(live) && live.value.accountId === owner.accountId)
        return Effect.succeed({ id, nodeId })
      return Effect.flatMap(find(owner, id), (row) =>
        row.status === "creating" || row.status === "ready"
          ? Effect.succeed(addressOfRow(row))
          : Effect.fail(new SessionNotOpen())
      )
    }

    const close = Effect.fn("Sessions.close")(function* (owner: Owner, id: string) {
      const address = yield* closing(owner, id)
      const origin = yield* CurrentOrigin
      const closedBy = { owner, ip: origin.ip, userAgent: origin.userAgent }
      if (!(yield* actors.close(address, "client_delete", closedBy))) return yield* new SessionNotOpen()
    })

    // The actor answers "gone" when the session ended under us: report what the row now says.
    const gone = (owner: Owner, id: string) =>
      Effect.flatMap(findReady(owner, id), () => Effect.fail(new SessionNotOpen()))

    /** Screenshots, page actions and the live view need a kind that has them (a sandbox has no screen). */
    const offering = (row: SessionRow, capability: Capability) => {
      const kind = kinds.ofRow(row)
      return kind.capabilities.has(capability)
        ? Effect.succeed(row)
        : Effect.fail(new SessionTypeMismatch({ detail: kind.refusal(capability) }))
    }

    const screenshot = Effect.fn("Sessions.screenshot")(function* (owner: Owner, id: string) {
      const row = yield* ready(yield* offering(yield* find(owner, id), "capture"))
      return yield* actors
        .screenshot(addressOfRow(row))
        .pipe(Effect.catchTag("SessionGone", () => gone(owner, id)))
    })

    const drive = Effect.fn("Sessions.drive")(function* (owner: Owner, id: string, action: PageAction) {
      const row = yield* ready(yield* offering(yield* find(owner, id), "drive"))
      return yield* actors
        .drive(addressOfRow(row), action)
        .pipe(Effect.catchTag("SessionGone", () => gone(owner, id)))
    })

    /**
     * Computer-use input on a browser session's page in front: the batch as
     * one page action, run where the session runs. A trailing `screenshot: true`
     * is the batch's screenshot action at its end.
     */
    const computer = Effect.fn("Sessions.computer")(
      function* (owner: Owner, id: string, request: ComputerRequest) {
        const shot = request.actions.some((action) => action.type === "screenshot")
        if (request.screenshot === true && shot) return yield* new InvalidField({ field: "screenshot" })
        const actions =
          request.screenshot === true
            ? [...request.actions, { type: "screenshot" as const }]
            : request.actions
        if (actions.length > MAX_ACTIONS) return yield* new InvalidField({ field: "actions" })
        const answer = yield* drive(owner, id, {
          _tag: "Computer",
          actions,
          scale: request.screenshot_scale ?? 1
        })
        return answer as unknown as ComputerAnswer
      },
      Effect.catchTag("PageActionFailed", (failed) =>
        failed.reason === "out_of_viewport"
          ? Effect.fail(new OutOfViewport({ detail: failed.detail }))
          : Effect.die(failed)
      )
    )

    const previewToken = Effect.fn("Sessions.previewToken")(function* (owner: Owner, id: string) {
      const row = yield* ready(yield* offering(yield* find(owner, id), "frames"))
      const at = yield* now
      const expiresAt = new Date(Math.min(at.getTime() + config.previewTokenTtlMs, row.expires_at.getTime()))
      // Input drives the browser, as a CDP client does: it needs what a CDP connect needs.
      const inputEnabled = permits(owner, "sessions.write")
      const token = previewTokens.sign({
        sessionId: id,
        accountId: owner.accountId,
        expiresAt,
        inputEnabled
      })
      yield* audit.record(owner, {
        action: "session.preview_token_issued",
        targetType: "session",
        targetId: id,
        details: { expires_at: expiresAt.toISOString(), input_enabled: inputEnabled }
      })
      return {
        url: `${previewBase(id)}?token=${token}`,
        expires_at: expiresAt,
        input_enabled: inputEnabled,
        fps: PREVIEW_FPS
      } satisfies PreviewToken
    })

    const resize = Effect.fn("Sessions.resize")(function* (owner: Owner, id: string, raw: ResizeRequest) {
      const row = yield* find(owner, id)
      const size = yield* kinds.ofRow(row).decodeResize(raw)
      if (row.status === "creating") return yield* new SessionNotReady()
      if (row.status !== "ready") return yield* new SessionNotOpen()
      yield* actors
        .resize(addressOfRow(row), size.cols, size.rows)
        .pipe(Effect.catchTag("SessionGone", () => gone(owner, id)))
      yield* audit.record(owner, {
        action: "session.resized",
        targetType: "session",
        targetId: id,
        details: { width: size.cols, height: size.rows }
      })
    })

    return { close, screenshot, drive, computer, previewToken, resize }
  })
