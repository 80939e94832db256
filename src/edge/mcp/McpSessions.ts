import { Cause, Effect, Exit, Fiber } from "effect"
import type { Protocol, RequestId } from "./McpRpc.ts"

/**
 * How many MCP sessions a node keeps, whoever opened them: the backstop behind
 * each account's own cap (`LIMIT_MCP_SESSIONS_PER_ACCOUNT`). Past either, the
 * one used least recently (the account's own, for its cap) is forgotten (its
 * in-flight calls end as a DELETE ends them); its client's next request is
 * answered 404, upon which the transport asks a client to start a new session.
 */
export const MAX_SESSIONS = 10_000

/** Why a call stopped before its answer: its request was cancelled, or its session ended. */
type Stop = "cancelled" | "ended"

/** An MCP session, opened by an `initialize`: its id, the revision it negotiated, its calls in flight. */
export interface McpSession {
  readonly id: string
  /** Who opened it (account and principal): only they may use or end it. */
  readonly caller: string
  /** The account it counts in. */
  readonly account: string
  readonly protocol: Protocol
  readonly inFlight: Map<string, Set<InFlight>>
}

/** A call in flight: the fiber it runs in, and why it was stopped, once it is. */
interface InFlight {
  readonly fiber: Fiber.Fiber<unknown, unknown>
  stop: Stop | undefined
}

const stop = (call: InFlight, why: Stop) => {
  call.stop = why
  call.fiber.interruptUnsafe()
}

/** A call's outcome: its answer, or why it has none. */
export type Tracked<A> =
  { readonly _tag: "Done"; readonly value: A } | { readonly _tag: "Cancelled" } | { readonly _tag: "Ended" }

const keyOf = (id: RequestId) => `${typeof id}:${id}`

/**
 * The MCP sessions this node opened, in memory: Streamable HTTP's sessions
 * live on the node that answered the `initialize` (another node answers their
 * id 404). A call runs tracked by its request's id, so a
 * `notifications/cancelled` of its session, or the session's `DELETE`, stops it.
 * At most `perAccount` of one account's, and `max` in all: one tenant opening
 * sessions in a loop forgets its own, not everyone's.
 */
export const make = (max = MAX_SESSIONS, perAccount = max) => {
  // In the order of last use: the first is the least recently used. The same order per account.
  const sessions = new Map<string, McpSession>()
  const byAccount = new Map<string, Map<string, McpSession>>()

  /** Makes `session` the most recently used, on the node and in its account. */
  const touch = (session: McpSession) => {
    sessions.delete(session.id)
    sessions.set(session.id, session)
    const own = byAccount.get(session.account)!
    own.delete(session.id)
    own.set(session.id, session)
  }

  const stopAll = (session: McpSession, why: Stop) => {
    for (const waiting of session.inFlight.values()) for (const call of waiting) stop(call, why)
    session.inFlight.clear()
  }

  const end = (id: string) => {
    const session = sessions.get(id)
    if (session === undefined) return false
    sessions.delete(id)
    const own = byAccount.get(session.account)!
    own.delete(id)
    if (own.size === 0) byAccount.delete(session.account)
    stopAll(session, "ended")
    return true
  }

  const open = (protocol: Protocol, caller: string, account: string): McpSession => {
    const own = byAccount.get(account)
    if (own !== undefined && own.size >= perAccount) end(own.keys().next().value!)
    if (sessions.size >= max) end(sessions.keys().next().value!)
    const session: McpSession = { id: crypto.randomUUID(), caller, account, protocol, inFlight: new Map() }
    sessions.set(session.id, session)
    const mine = byAccount.get(account) ?? new Map<string, McpSession>()
    mine.set(session.id, session)
    byAccount.set(account, mine)
    return session
  }

  /** The session of `id` if `caller` opened it, now its most recently used; another's is none. */
  const find = (id: string, caller: string) => {
    const session = sessions.get(id)
    if (session === undefined || session.caller !== caller) return undefined
    touch(session)
    return session
  }

  /** Stops the session's calls of request `id` (a client's `notifications/cancelled`). */
  const cancel = (session: McpSession, id: RequestId) => {
    const key = keyOf(id)
    const waiting = session.inFlight.get(key)
    if (waiting === undefined) return
    session.inFlight.delete(key)
    for (const call of waiting) stop(call, "cancelled")
  }

  /**
   * Runs `effect` as the session's request `id`, in a fiber of its own that a cancel or the session's
   * end interrupts: one fiber a call (racing it against a signal of the stop took two, and an
   * interruption of the loser on every call).
   */
  const track = <A, E, R>(
    session: McpSession,
    id: RequestId,
    effect: Effect.Effect<A, E, R>
  ): Effect.Effect<Tracked<A>, E, R> =>
    Effect.suspend(() => {
      if (!sessions.has(session.id)) return Effect.succeed({ _tag: "Ended" as const })
      const key = keyOf(id)
      return Effect.flatMap(Effect.forkChild(effect), (fiber) => {
        const call: InFlight = { fiber, stop: undefined }
        const waiting = session.inFlight.get(key) ?? new Set()
        waiting.add(call)
        session.inFlight.set(key, waiting)
        return Effect.flatMap(Fiber.await(fiber), (exit): Effect.Effect<Tracked<A>, E> => {
          if (Exit.isSuccess(exit)) return Effect.succeed({ _tag: "Done", value: exit.value })
          if (call.stop !== undefined && Cause.hasInterruptsOnly(exit.cause))
            return Effect.succeed(call.stop === "cancelled" ? { _tag: "Cancelled" } : { _tag: "Ended" })
          return Effect.failCause(exit.cause)
        }).pipe(
          Effect.ensuring(
            Effect.sync(() => {
              waiting.delete(call)
              if (waiting.size === 0 && session.inFlight.get(key) === waiting) session.inFlight.delete(key)
            })
          )
        )
      })
    })

  return { open, find, end, cancel, track, size: () => sessions.size }
}

export type McpSessions = ReturnType<typeof make>
