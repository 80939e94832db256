import { Context, Effect, Layer, type Scope } from "effect"
import type { InvalidField, InvalidRequest } from "../kernel/Errors.ts"
import { collect } from "../kernel/Plugins.ts"
import type { RuntimePool, SessionRuntime } from "./SessionRuntime.ts"
import type { Isolation, RuntimeKind, SessionStatus, SessionType } from "../kernel/Session.ts"
import type { ResourceBounds } from "../kernel/SandboxResources.ts"

/**
 * What a live session may offer beyond what every runtime gives its actor:
 * - `cdp`: a DevTools endpoint clients drive (the CDP relay);
 * - `frames`: a screen, watched as frames (the live view, recordings);
 * - `capture`: a screenshot of that screen;
 * - `drive`: the service's own page actions (the MCP page tools);
 * - `downloads`: files the session downloaded, kept after it;
 * - `exec`: commands, their streams and file transfer;
 * - `pty`: interactive terminals;
 * - `gateway`: HTTP to a port a program in the session listens on.
 */
export type Capability = "cdp" | "frames" | "capture" | "drive" | "downloads" | "exec" | "pty" | "gateway"

/**
 * Whether a live runtime holds what `capability` needs: its kind said so
 * before the connection was let in, and the runtime agrees unless the row
 * was read wrong. A session's kept downloads are files on its node, not the
 * runtime's.
 */
export const offers = (runtime: SessionRuntime, capability: Capability): boolean => {
  switch (capability) {
    case "cdp":
      return runtime.cdp !== undefined
    case "frames":
      return runtime.frames !== undefined
    case "capture":
      return runtime.screenshot !== undefined
    case "drive":
      return runtime.drive !== undefined
    case "exec":
      return runtime.exec !== undefined
    case "pty":
      return runtime.pty !== undefined
    case "gateway":
      return runtime.gateway !== undefined
    case "downloads":
      return true
  }
}

/** A capability in a refusal's words. */
const WORDS: Record<Capability, string> = {
  cdp: "CDP endpoint",
  frames: "live view",
  capture: "screen to capture",
  drive: "page to act on",
  downloads: "downloads",
  exec: "commands or files",
  pty: "terminal",
  gateway: "gateway"
}

/** What a session of `sessionType` lacking `capability` is told, unless its kind says it better. */
export const refusalOf = (sessionType: string, capability: Capability) =>
  `This is a ${sessionType} session: it has no ${WORDS[capability]}.`

/** The URLs a session's endpoints are made of; which ones it shows is its kind's. */
export interface SessionUrls {
  readonly cdpUrl: string
  readonly gatewayUrl: string
  readonly videoUrl: string
}

/** A session's endpoints as GET, list and create show them. */
export interface SessionEndpoints {
  readonly cdp_url: string | null
  readonly control: string
  readonly video: string | null
}

/**
 * A kind of session: what `CreateSession`, `SessionView`, `SessionControls`
 * and the connection doors decide by kind, kept beside its runtime
 * (`runtimes/<kind>/`) and registered by the composition root. Nothing
 * outside the runtimes branches on a kind: it asks the kind's descriptor.
 */
export interface KindDescriptor {
  /** The runtime kind: its pool (`RuntimePools.of`) and its capacity on each node. */
  readonly kind: RuntimeKind
  /** How its sessions show on the wire (`session_type`) and in the table, with their `isolation`. */
  readonly sessionType: SessionType
  readonly isolation: Isolation
  readonly capabilities: ReadonlySet<Capability>
  /** What a client asking for a capability this kind lacks is told (409 `session_type_mismatch`). */
  readonly refusal: (capability: Capability) => string
  /** The create options its sessions take; another is 400 `invalid_field` naming it. */
  readonly accepts: {
    readonly image: boolean
    readonly recording: boolean
    /** `logs`: it has pages whose requests, console and errors the session's log keeps. */
    readonly logs: boolean
    readonly workspace: boolean
    /** `viewport`'s size: its windows take it. */
    readonly viewport: boolean
    /** `user_agent`, `locale`, `timezone` and a viewport's scale and `mobile`: its own browser takes them at launch. */
    readonly identity: boolean
  }
  /**
   * The bounds of `resources` at create (this node's defaults and maxima);
   * `null`: its sessions take none (`resources` is 400 `invalid_field`) and show null.
   */
  readonly resources: ResourceBounds | null
  /** The image a session runs when create names none; `null`: its sessions run no image. */
  readonly defaultImage: string | null
  /** Whether an image of that name is in this node's store (`image` on create). */
  readonly imageExists: (name: string) => Effect.Effect<boolean>
  /** `POST /v1/sessions/{id}/resize`: its body as this kind reads it (a browser's CSS pixels, a terminal's cells). */
  readonly decodeResize: (
    body: unknown
  ) => Effect.Effect<{ readonly cols: number; readonly rows: number }, InvalidField | InvalidRequest>
  /** Which of the session's URLs it shows, while `status` holds. */
  readonly endpoints: (urls: SessionUrls, status: SessionStatus) => SessionEndpoints
}

/**
 * A kind of session as the composition root registers it: its descriptor and
 * the pool its runtimes come from on each node (both from `runtimes/<kind>/`).
 */
export interface SessionKind<E = never, R = never> {
  readonly descriptor: Effect.Effect<KindDescriptor, E, R>
  readonly pool: Effect.Effect<RuntimePool, E, R | Scope.Scope>
}

/** The kinds this service knows, by runtime kind and by how a row names them. */
export class SessionKinds extends Context.Service<
  SessionKinds,
  {
    readonly all: ReadonlyArray<KindDescriptor>
    readonly of: (kind: RuntimeKind) => KindDescriptor
    /** The kind whose sessions have this type and isolation, if one is registered. */
    readonly find: (sessionType: SessionType, isolation: Isolation) => KindDescriptor | undefined
    /** Whether a kind of this `session_type` is registered (one it is not is 400 `invalid_field`). */
    readonly hasType: (sessionType: SessionType) => boolean
    /** The kind of a session row. */
    readonly ofRow: (row: {
      readonly session_type: SessionType
      readonly isolation: Isolation
    }) => KindDescriptor
  }
>()("rbs/runtime/SessionKinds") {
  static readonly fromKinds = (kinds: ReadonlyArray<KindDescriptor>) => {
    const byKind = new Map(kinds.map((kind) => [kind.kind, kind]))
    const byRow = new Map(kinds.map((kind) => [`${kind.sessionType}/${kind.isolation}`, kind]))
    const find = (sessionType: SessionType, isolation: Isolation) => byRow.get(`${sessionType}/${isolation}`)
    return SessionKinds.of({
      all: kinds,
      of: (kind) => {
        const found = byKind.get(kind)
        if (found === undefined) throw new Error(`no session kind ${kind} is registered`)
        return found
      },
      find,
      hasType: (sessionType) => kinds.some((kind) => kind.sessionType === sessionType),
      ofRow: (row) => {
        const found = find(row.session_type, row.isolation)
        if (found === undefined) throw new Error(`no session kind runs ${row.session_type}/${row.isolation}`)
        return found
      }
    })
  }

  /** The kinds the composition root names, each built by its runtime's module (`main/App.ts`). */
  static readonly layer = <Kind extends Effect.Effect<KindDescriptor, any, any>>(
    kinds: ReadonlyArray<Kind>
  ): Layer.Layer<SessionKinds, Effect.Error<Kind>, Exclude<Effect.Services<Kind>, Scope.Scope>> =>
    Layer.effect(SessionKinds, Effect.map(collect(kinds), SessionKinds.fromKinds))
}
