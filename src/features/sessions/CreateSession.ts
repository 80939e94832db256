import { Clock, Effect, Option, Redacted, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { Secrets } from "../../platform/crypto/Secrets.ts"
import { AdHosts } from "../../platform/net/AdHosts.ts"
import * as SessionProxy from "./SessionProxy.ts"
import * as BrowserIdentity from "../../kernel/BrowserIdentity.ts"
import { SessionsConfig } from "./SessionsConfig.ts"
import { NodeConfig, PublicUrls } from "../../platform/config/Config.ts"
import { LiveSessions } from "../../runtime/LiveSessions.ts"
import { RuntimePools } from "../../runtime/RuntimePools.ts"
import { ACCOUNT_ID, SESSION_ID } from "../../platform/observability/Tracing.ts"
import { Placement } from "../../platform/cluster/Placement.ts"
import {
  type CapacityExhausted,
  type IdempotencyConflict,
  InvalidField,
  type SessionKindUnavailable
} from "../../kernel/Errors.ts"
import { type CreateSessionRequest, SessionCreated, TTL_DEFAULT_SECONDS } from "../../kernel/Session.ts"
import { SessionKinds, type SessionUrls } from "../../runtime/SessionKinds.ts"
import { resolveResources, type ResourceValues } from "../../kernel/SandboxResources.ts"
import { Egress } from "../../platform/net/Egress.ts"
import { Idempotency } from "../idempotency/Idempotency.ts"
import { type AdmissionRefused, SessionAdmission } from "./SessionAdmission.ts"
import { apiKeyIdOf, isLive, type Owner } from "../../kernel/Owner.ts"
import { Audit } from "../audit/Audit.ts"
import { SessionActors } from "./SessionActors.ts"
import { SessionsRepo } from "./SessionsRepo.ts"
import { WebhookOutbox } from "../webhooks/Outbox.ts"
import { createdEventPart } from "./SessionEvents.ts"
import {
  type StorageLimitReached,
  WorkspaceConflict,
  type WorkspaceNotFound
} from "../../kernel/Workspace.ts"
import { SessionWorkspaces } from "./SessionWorkspaces.ts"
import { SessionExtensions } from "./SessionExtensions.ts"
import { SessionImages } from "./SessionImages.ts"

const CREATE_ROUTE = "POST /v1/sessions"
/**
 * How long a create whose start takes a runtime made ahead (a warm browser, a context) waits for it
 * to be ready before it answers: a start past it (a busy machine) is answered as any, `creating`.
 */
export const QUICK_START_WAIT = "50 millis"
/** The CTE of the insert's statement that its parts read the new row from. */
const INSERTED = "inserted"
/** Printable ASCII, as Stripe accepts: up to 255 characters. */
const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/

export interface CreateOptions {
  /** The `Idempotency-Key` of the request: retries with it within 24 hours create nothing new. */
  readonly idempotencyKey?: string | undefined
  /**
   * Place the session on this node or refuse it (`capacity_exhausted`): a
   * job's session runs where the job was claimed, a workspace's where its
   * disk lives.
   */
  readonly node?: string | undefined
  /** The status the session's workspace must have: `ready` but for the import job's own session. */
  readonly workspaceStatus?: "ready" | "importing" | undefined
}

export type CreateError =
  | InvalidField
  | AdmissionRefused
  | CapacityExhausted
  | SessionKindUnavailable
  | IdempotencyConflict
  | WorkspaceNotFound
  | WorkspaceConflict
  | StorageLimitReached

/** The first identity field the session's kind does not take, if one is given. */
const identityRefusal = (
  identity: BrowserIdentity.BrowserIdentity,
  accepts: { readonly viewport: boolean; readonly identity: boolean }
) => {
  if (!accepts.identity)
    for (const field of ["user_agent", "locale", "timezone"] as const)
      if (identity[field] !== undefined) return field
  if (identity.viewport === undefined) return undefined
  if (!accepts.viewport) return "viewport"
  const { device_scale_factor, mobile } = identity.viewport
  if (!accepts.identity && ((device_scale_factor ?? 1) !== 1 || mobile === true)) return "viewport"
  return undefined
}

const now = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis))
const encodeCreated = Schema.encodeSync(SessionCreated)
const decodeCreated = Schema.decodeUnknownSync(SessionCreated)

/**
 * `POST /v1/sessions`: the idempotency record, the admission (rate limit,
 * balance, concurrency slot), the placement on a node with room and the
 * insert in one transaction, then the entity's start. With no room anywhere
 * it is refused before any limit is spent. Answers whether the session is a replay of an earlier
 * request with the same `Idempotency-Key`.
 */
export const make = Effect.gen(function* () {
  const config = yield* PublicUrls
  const repo = yield* SessionsRepo
  const actors = yield* SessionActors
  const admission = yield* SessionAdmission
  const egress = yield* Egress
  const idempotency = yield* Idempotency
  const audit = yield* Audit
  const placement = yield* Placement
  const outbox = yield* WebhookOutbox
  const kinds = yield* SessionKinds
  const workspaces = yield* SessionWorkspaces
  const sessionsConfig = yield* SessionsConfig
  const secretsKey = Redacted.value((yield* Secrets).secretsAtRestKey)
  const adHosts = yield* AdHosts
  const sessionExtensions = yield* SessionExtensions
  const sessionImages = yield* SessionImages
  const sql = yield* SqlClient.SqlClient
  const pools = yield* RuntimePools
  const liveSessions = yield* LiveSessions
  const node = yield* NodeConfig
  /**
   * The session live on this node (ready), or `QUICK_START_WAIT` passed, or it ended first: whichever
   * comes first. Its slot stays: the session is this node's, and its start registers or ends it.
   */
  const readyOrLater = (id: string) =>
    liveSessions
      .awaitLive(id)
      .pipe(Effect.timeoutOption(QUICK_START_WAIT), Effect.ignore, Effect.withSpan("session.quick_start"))
  const urls = (id: string): SessionUrls => ({
    cdpUrl: `${config.cdpBase}/sessions/${id}`,
    gatewayUrl: `${config.publicUrl}/s/${id}/`,
    videoUrl: `${config.streamBase}/sessions/${id}/preview`
  })

  const createIdempotent = Effect.fn("Sessions.create")(function* (
    owner: Owner,
    input: CreateSessionRequest,
    options?: CreateOptions
  ) {
    if (input.session_type !== undefined && !kinds.hasType(input.session_type))
      return yield* new InvalidField({ field: "session_type" })
    const key = options?.idempotencyKey
    if (key !== undefined && !IDEMPOTENCY_KEY.test(key)) {
      return yield* new InvalidField({ field: "Idempotency-Key" })
    }
    const scope =
      key === undefined ? undefined : { accountId: owner.accountId, route: CREATE_ROUTE, key, request: input }
    const replay = (found: Option.Option<{ readonly body: unknown }>) =>
      Option.map(found, (stored) => ({
        session: decodeCreated(stored.body),
        replayed: true,
        nodeId: undefined as string | undefined
      }))
    // A replay spends nothing, but its answer says where the budget stands, as the first one did.
    const replayed = (answer: { readonly session: SessionCreated; readonly replayed: boolean }) =>
      Effect.as(admission.describe(owner), answer)
    if (scope !== undefined) {
      const earlier = replay(yield* idempotency.replay(scope))
      if (Option.isSome(earlier)) return yield* replayed(earlier.value)
    }

    const workspace =
      input.workspace === undefined
        ? undefined
        : yield* workspaces.open(owner.accountId, input.workspace, options?.workspaceStatus ?? "ready")
    if (input.persistence !== undefined && workspace === undefined)
      return yield* new InvalidField({ field: "persistence" })
    if (
      workspace !== undefined &&
      workspace.sessionType !== null &&
      input.session_type !== undefined &&
      input.session_type !== workspace.sessionType
    )
      return yield* new InvalidField({ field: "session_type" })
    const sessionType = input.session_type ?? workspace?.sessionType ?? "browser"
    // The type's own kind (its default isolation) says which create options apply.
    const typeKind = kinds.ofRow({ session_type: sessionType, isolation: "browser" })
    if (
      workspace !== undefined &&
      input.isolation !== undefined &&
      kinds.find(sessionType, input.isolation)?.accepts.workspace !== true
    )
      return yield* new InvalidField({ field: "isolation" })
    if (workspace?.image != null && input.image !== undefined && input.image !== workspace.image)
      return yield* new InvalidField({ field: "image" })
    // What only another kind has is a wrong field, not ignored: the client meant something by it.
    if (!typeKind.accepts.image && input.image !== undefined)
      return yield* new InvalidField({ field: "image" })
    if (!typeKind.accepts.recording && input.recording === true) {
      return yield* new InvalidField({ field: "recording" })
    }
    if (!typeKind.accepts.logs && input.logs === true) return yield* new InvalidField({ field: "logs" })
    // The account's image of that name wins over the node's; one still pulling, or failed, is refused.
    const accountImage =
      input.image === undefined || !typeKind.accepts.image
        ? Option.none()
        : yield* sessionImages.find(owner.accountId, input.image)
    if (Option.isSome(accountImage) && accountImage.value.status !== "ready")
      return yield* new InvalidField({ field: "image" })
    if (
      input.image !== undefined &&
      Option.isNone(accountImage) &&
      !(yield* typeKind.imageExists(input.image))
    ) {
      return yield* new InvalidField({ field: "image" })
    }
    const isolation = input.isolation ?? "browser"
    const descriptor = kinds.find(sessionType, isolation)
    if (descriptor === undefined) return yield* new InvalidField({ field: "isolation" })
    // Resolved here, against this node's defaults and maxima: the row keeps what the sandbox gets.
    let resources: ResourceValues | null = null
    if (descriptor.resources === null) {
      if (input.resources !== undefined) return yield* new InvalidField({ field: "resources" })
    } else {
      const resolved = resolveResources(descriptor.resources, input.resources)
      if ("refused" in resolved) return yield* new InvalidField({ field: `resources.${resolved.refused}` })
      resources = resolved
    }
    const identity = BrowserIdentity.fromCreate(input)
    if (identity !== undefined) {
      const refused = identityRefusal(identity, descriptor.accepts)
      if (refused !== undefined) return yield* new InvalidField({ field: refused })
    }
    // Loaded at its browser's launch: a kind whose launch is its own, and the account's each.
    const extensions = input.extensions ?? []
    if (extensions.length > 0) {
      if (!descriptor.accepts.identity || new Set(extensions).size !== extensions.length)
        return yield* new InvalidField({ field: "extensions" })
      const owned = yield* sessionExtensions.owned(owner.accountId, extensions)
      if (owned.length !== extensions.length) return yield* new InvalidField({ field: "extensions" })
    }
    const ttlSeconds = input.ttl_seconds ?? TTL_DEFAULT_SECONDS
    const region =
      input.region === undefined
        ? egress.defaultRegion
        : yield* Option.match(egress.region(input.region), {
            onNone: () => Effect.fail(new InvalidField({ field: "region" })),
            onSome: Effect.succeed
          })
    // The caller's own upstream takes the place of a region: one or the other.
    if (input.proxy !== undefined && input.region !== undefined)
      return yield* new InvalidField({ field: "proxy" })
    const proxy = input.proxy === undefined ? null : SessionProxy.toStored(secretsKey, input.proxy)
    if (proxy instanceof InvalidField) return yield* proxy
    if (input.block_ads === true && adHosts.unavailable !== undefined)
      return yield* new InvalidField({ field: "block_ads" })
    // Nodes with room, read before anything is spent: a full cluster costs the client no budget.
    // A refusal of the client's own (balance, concurrency) goes first: waiting would not cure it.
    const candidates = yield* placement
      .candidates(descriptor, options?.node ?? workspace?.node)
      .pipe(
        Effect.tapError(() => admission.ownRefusal(owner).pipe(Effect.andThen(admission.describe(owner))))
      )
    // Read before the start takes one: a runtime made ahead is there for it.
    const quickStart = (yield* pools.of(descriptor.kind).idle) > 0
    const createdAt = yield* now
    const expiresAt = new Date(createdAt.getTime() + ttlSeconds * 1000)
    // A client that hangs up must not leave a committed session without its start:
    // from the admission to the start message, nothing is interrupted.
    const inserted = yield* admission
      .admit(
        owner,
        Effect.gen(function* () {
          // One open session per workspace: the workspace's row is locked until this insert commits.
          if (workspace !== undefined) {
            const status = yield* workspaces.lock(workspace.id)
            const open = yield* repo.openOnWorkspace(workspace.id)
            if (
              Option.isNone(status) ||
              status.value !== (options?.workspaceStatus ?? "ready") ||
              open !== null
            )
              return yield* new WorkspaceConflict({
                detail:
                  open === null
                    ? `The workspace is ${Option.getOrElse(status, () => "gone")}: wait for it to finish.`
                    : `The workspace has an open session (${open}): end it first.`
              })
            yield* workspaces.settleType(workspace.id, sessionType)
          }
          // The node holds the session's actor (its shard group) and its runtime, for its whole life.
          const { id, nodeId } = yield* placement.take(descriptor, candidates).pipe(
            Effect.tap((place) =>
              Effect.annotateCurrentSpan({ [SESSION_ID]: place.id, "rbs.node.id": place.nodeId })
            ),
            Effect.withSpan("session.placement", { attributes: { [ACCOUNT_ID]: owner.accountId } })
          )
          const session: SessionCreated = {
            id,
            object: "session",
            status: "creating",
            cdp_url: descriptor.endpoints(urls(id), "creating").cdp_url,
            created_at: createdAt,
            expires_at: expiresAt
          }
          // In the insert's transaction: a retry finds both the session and its record, or neither.
          if (scope !== undefined)
            yield* idempotency.record(scope, { status: 201, body: encodeCreated(session) })
          // The row, its `session.created` event and its audit record: one statement.
          const parts = [
            { ctes: yield* createdEventPart(outbox, sql, INSERTED) },
            {
              ctes: yield* audit.recordPart("created_audit", INSERTED, owner.principal, {
                action: "session.created",
                targetType: "session",
                targetId: id,
                details: {
                  session_type: sessionType,
                  ...(isolation === typeKind.isolation ? {} : { isolation }),
                  ttl_seconds: ttlSeconds,
                  region: region.name,
                  live: isLive(owner),
                  ...(input.image === undefined ? {} : { image: input.image }),
                  ...(input.resources === undefined ? {} : { resources })
                }
              })
            }
          ]
          const row = yield* repo.insert(
            {
              id,
              accountId: owner.accountId,
              apiKeyId: apiKeyIdOf(owner),
              live: isLive(owner),
              sessionType,
              isolation,
              // The image it runs, named: the default is the node's `SANDBOX_IMAGE` at create.
              image:
                descriptor.defaultImage === null
                  ? null
                  : (input.image ?? workspace?.image ?? descriptor.defaultImage),
              profile: input.profile ?? "default",
              device: "",
              ttlSeconds,
              idleTimeoutSeconds: input.idle_timeout_seconds ?? sessionsConfig.idleTimeoutSeconds ?? null,
              region: region.name,
              nodeId,
              createdAt,
              expiresAt,
              recording: input.recording ?? false,
              logs: input.logs ?? typeKind.accepts.logs,
              workspaceId: workspace?.id ?? null,
              persistence: workspace === undefined ? null : (input.persistence ?? workspace.persistence),
              metadata: input.metadata ?? {},
              proxy,
              blockAds: input.block_ads ?? false,
              identity: identity ?? null,
              extensions,
              resources,
              imageId: Option.isSome(accountImage) ? accountImage.value.id : null
            },
            INSERTED,
            parts
          )
          return Option.some({ session, replayed: false, nodeId: nodeId as string | undefined, row })
        })
      )
      .pipe(
        // A concurrent request with the same key committed first: answer what it answered.
        Effect.catchTag("IdempotencyRace", () =>
          Effect.map(idempotency.replay(scope!), (found) => replay(found))
        ),
        Effect.tap((answer) =>
          Option.isSome(answer)
            ? Effect.annotateCurrentSpan(SESSION_ID, answer.value.session.id)
            : Effect.void
        ),
        Effect.withSpan("session.admission", {
          attributes: { [ACCOUNT_ID]: owner.accountId, "rbs.session.type": sessionType }
        }),
        Effect.tap((answer) =>
          Option.isSome(answer) && answer.value.nodeId !== undefined
            ? actors.start(
                { id: answer.value.session.id, nodeId: answer.value.nodeId },
                "row" in answer.value ? answer.value.row : undefined
              )
            : Effect.void
        ),
        Effect.uninterruptible
      )
    // `None` only when a concurrent request's record vanished (purged): nothing to replay.
    const answer = yield* Effect.fromOption(inserted).pipe(Effect.orDie)
    if (answer.replayed) return yield* replayed(answer)
    // A start that takes a runtime made ahead is done within milliseconds: the answer waits for it
    // (a little), so the client's first look finds the session ready instead of polling for it.
    if (quickStart && answer.nodeId === node.nodeId) yield* readyOrLater(answer.session.id)
    yield* Effect.logInfo("session.created", {
      sessionId: answer.session.id,
      accountId: owner.accountId,
      ttlSeconds
    })
    return answer
  })

  return createIdempotent
})
