import { Effect, Schema, type Deferred, type Scope } from "effect"
import type { BrowserIdentity } from "../kernel/BrowserIdentity.ts"
import type { EndedReason, RuntimeKind, SessionType } from "../kernel/Session.ts"
import type { SelfTestReport } from "../kernel/Sandbox.ts"
import type { ResourceValues } from "../kernel/SandboxResources.ts"
import type { BrowserVersion, CdpError, TargetInfo } from "../platform/cdp/CdpClient.ts"
import type { Outcome as SpliceOutcome } from "../platform/net/Splice.ts"
import type { End } from "../platform/net/WebSocketEnds.ts"
import type { EgressTap } from "./EgressTap.ts"
import type { EgressRegion } from "../platform/net/Regions.ts"
import type { PageAction } from "./Drive.ts"
import type { Screencast } from "./Frames.ts"
import type { PageLogSource } from "./PageLog.ts"
import type { ExecCapability, GatewayCapability, PtyCapability } from "./Exec.ts"

/** A runtime could not be had for a session: its launch failed, or the node has no place for it. */
export class RuntimeLaunchError extends Schema.TaggedError<RuntimeLaunchError>()("RuntimeLaunchError", {
  message: Schema.String,
  cause: Schema.optional(Schema.Defect())
}) {}

/** What a session asks of its kind's pool. */
export interface LaunchSpec {
  readonly sessionId: string
  readonly accountId: string
  /** The egress region the runtime's proxy is bound to. */
  readonly region: EgressRegion
  /** A sandbox's image, as named on create (the pool's default when null). */
  readonly image: string | null
  /** An account's image (`image` naming one of the account's): its OCI layout on this node, in place of the node's store. */
  readonly accountImage?: { readonly dir: string; readonly ref: string } | undefined
  /**
   * The directory the session runs on, mounted for the runtime's scope (a
   * workspace's disk: a browser's profile, a sandbox's home), and whether
   * what the session writes there is kept. Absent: a fresh one of the runtime's own.
   */
  readonly home?: { readonly dir: string; readonly persists: boolean } | undefined
  /** What a browser's pages say of it (`user_agent`, `locale`, `timezone`, `viewport` at create); absent: the defaults. */
  readonly identity?: BrowserIdentity | undefined
  /** Unpacked extensions its browser loads (dirs of this node, read-only); absent or empty: none. */
  readonly extensions?: ReadonlyArray<string> | undefined
  /** A sandbox's CPUs, memory, disk and processes (`resources` at create, resolved); absent: the node's defaults. */
  readonly resources?: ResourceValues | undefined
}

/**
 * The live resource behind a session, of whatever kind: what every runtime
 * gives the session's actor (its TTL, billing, webhooks, liveness and ending
 * are the same whatever runs behind it), and the capabilities it offers or
 * not. A route asks for a capability; its kind's descriptor (`SessionKinds`)
 * says beforehand whether the session has it, and what a client asking for
 * it is told when not.
 */
export interface SessionRuntime {
  /** Its sessions' `session_type`. */
  readonly kind: SessionType
  /** The process whose death ends the session (for logs). */
  readonly pid: number
  /** The session's `device`: what runs, in words. */
  readonly device: string
  /** The runtime's egress proxy, bound to the session: every byte it moves is counted here. */
  readonly egress: EgressTap
  /** Completes if the runtime dies under the session. */
  readonly exited: Deferred.Deferred<void>
  /** The `ended_reason` of a session whose runtime died (`browser_crashed`, `sandbox_crashed`). */
  readonly crashReason: EndedReason
  /**
   * Why it died, asked once `exited` is done and before its scope closes: a
   * reason more precise than `crashReason` (a sandbox whose supervisor the
   * kernel killed for memory: `memory_limit`), or undefined. Absent: `crashReason`.
   */
  readonly diedOf?: Effect.Effect<EndedReason | undefined> | undefined
  /**
   * Whether work of its own is under way that counts as use, so the session is not idle while no
   * client is connected (a sandbox's running commands). Absent: only clients use it.
   */
  readonly busy?: (() => boolean) | undefined
  /**
   * The runtime's own work while it serves the session, held until the
   * scope closes: when the session ends, before its final figures are
   * recorded (the session's recorder runs beside it the same way).
   */
  readonly serve: Effect.Effect<void, never, Scope.Scope>
  /** `POST /v1/sessions/{id}/resize`: a browser's viewport in CSS pixels, a sandbox's PTYs in cells. */
  readonly resize: (width: number, height: number) => Effect.Effect<void, unknown>
  /** The session's screen as frames, shared by its live-view viewers and its recorder; none without a screen. */
  readonly frames?: Screencast | undefined
  /** A PNG of what is on screen (`capture`); none without a screen. */
  readonly screenshot?: Effect.Effect<Uint8Array, unknown> | undefined
  /**
   * The service's own action on the page in front (`drive`): its answer, or
   * a failure: the page's refusal (a `PageActionFailed`, the caller's answer)
   * or the runtime's.
   */
  readonly drive?: ((action: PageAction) => Effect.Effect<Schema.Json, unknown>) | undefined
  /** A DevTools endpoint clients drive through the relay (`cdp`). */
  readonly cdp?: CdpUpstream | undefined
  /** Its pages' requests, console, errors and tabs, for the session's log (`logs`). */
  readonly pageLog?: PageLogSource | undefined
  /** Commands and files in the session (`exec`). */
  readonly exec?: ExecCapability | undefined
  /** Interactive terminals (`pty`). */
  readonly pty?: PtyCapability | undefined
  /** A port a program in the session listens on (`gateway`). */
  readonly gateway?: GatewayCapability | undefined
  /** `POST /v1/sessions/{id}/self-test`: the runtime's own checks; without it, its egress proxy's alone. */
  readonly selfTest?: ((sessionId: string) => Effect.Effect<SelfTestReport>) | undefined
}

/** What the CDP relay reaches a session's browser through. */
export interface CdpUpstream {
  /** Chromium's DevTools WebSocket, on this node's loopback. */
  readonly endpoint: string
  /**
   * A connection to it dialed ahead, which the session's first CDP client
   * takes instead of dialing (once; `undefined` after, or when there is
   * none): a context made ahead has one ready.
   */
  readonly takeUpstream?: (() => End | undefined) | undefined
  /**
   * What a client waits for before its connection is taken (before the upgrade, so none of its
   * frames is left unread meanwhile): set-up the session finishes after it is ready (a context's
   * downloads dir). `false`: it never did, and the session takes no client. Absent: none.
   */
  readonly admits?: Effect.Effect<boolean> | undefined
  /**
   * Joins a client to the upstream until one side goes, as the session must:
   * the client's frames past the CDP guard, and a context session's
   * connection scoped to its context.
   */
  readonly relay: (client: End, upstream: End) => Effect.Effect<SpliceOutcome>
  /**
   * `relay` for a client of one page target, as Chromium's own
   * `/devtools/page/{id}` serves it, over a connection to the browser's
   * endpoint: the relay attaches to the page for the client, so its frames
   * pass the same guard and scope as a browser-level client's. The splice
   * ends (`ScopeEnded`) when the page goes, or could not be attached.
   */
  readonly relayPage: (client: End, upstream: End, targetId: string) => Effect.Effect<SpliceOutcome>
  /** The browser's own account of itself, asked on the session's control connection (DevTools discovery). */
  readonly version: Effect.Effect<BrowserVersion, CdpError>
  /** The session's pages (its context's alone, for a context session), most recently active first. */
  readonly pages: Effect.Effect<ReadonlyArray<TargetInfo>, CdpError>
}

/** A runtime with a screen, pages and a DevTools endpoint (a browser's). */
export interface BrowserRuntime extends SessionRuntime {
  readonly frames: Screencast
  readonly screenshot: Effect.Effect<Uint8Array, unknown>
  readonly drive: (action: PageAction) => Effect.Effect<Schema.Json, unknown>
  readonly cdp: CdpUpstream
  readonly pageLog: PageLogSource
  /**
   * The dir files given to its pages go in (`POST /v1/sessions/{id}/uploads`), made and shown to
   * its browser at the first ask: the one place a file input of the session takes a file from.
   */
  readonly uploadsDir: Effect.Effect<string, unknown>
}

/** A runtime with programs, files and ports (a sandbox's). */
export interface SandboxRuntime extends SessionRuntime {
  readonly exec: ExecCapability
  readonly pty: PtyCapability
  readonly gateway: GatewayCapability
}

/**
 * One kind's pool of runtimes: warm ones kept ready, each holding one of the
 * node's places of that kind (`MAX_BROWSERS`, `MAX_SANDBOXES`) from before
 * its launch until it is torn down.
 */
export interface RuntimePool {
  readonly kind: RuntimeKind
  /**
   * A runtime for a session, handed over into the caller's scope (which then
   * owns its teardown), its egress bound to the session's region.
   */
  readonly acquire: (spec: LaunchSpec) => Effect.Effect<SessionRuntime, RuntimeLaunchError, Scope.Scope>
  /** Closes a scope holding an acquired runtime in the background: a session ends without waiting for it. */
  readonly retire: (scope: Scope.Closeable) => Effect.Effect<void>
  /** Runtimes waiting warm right now. */
  readonly idle: Effect.Effect<number>
  /** Warm runtimes the pool aims for now. */
  readonly target: Effect.Effect<number>
  /** How many of this kind the node runs at most. */
  readonly capacity: number
  /** Completes once the pool has launched its first runtime (or failed to), or at once when it keeps none warm. */
  readonly ready: Effect.Effect<boolean>
  /** Whether this node runs the kind at all, found at start (`availabilityOf` reads it); absent: while it has places. */
  readonly availability?: Availability | undefined
}

/**
 * Whether a node runs a kind of session, found once at start. When it does
 * not, why and what would change that, in words for the operator (the log,
 * `/readyz`, `rbs doctor`) and the client (503 `session_type_unavailable`):
 * no secret goes in them.
 */
export type Availability =
  { readonly available: true } | { readonly available: false; readonly reason: string }

export const AVAILABLE: Availability = { available: true }

export const notAvailable = (reason: string): Availability => ({ available: false, reason })

/** Whether this node runs `pool`'s kind: a pool with no places runs none, whatever it says. */
export const availabilityOf = (pool: RuntimePool): Availability =>
  pool.availability?.available === false
    ? pool.availability
    : pool.capacity > 0
      ? AVAILABLE
      : notAvailable(`this node has no places for ${pool.kind} sessions`)

/** A kind this node does not run, for `reason`: no place, and every acquire refused. */
export const unavailable = (kind: RuntimeKind, reason: string): RuntimePool => ({
  kind,
  acquire: () =>
    Effect.fail(new RuntimeLaunchError({ message: `this node runs no ${kind} sessions: ${reason}` })),
  retire: () => Effect.void,
  idle: Effect.succeed(0),
  target: Effect.succeed(0),
  capacity: 0,
  ready: Effect.succeed(true),
  availability: notAvailable(reason)
})
