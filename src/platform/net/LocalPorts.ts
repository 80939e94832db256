import { Context, Effect, Layer, Option, Redacted, type Scope } from "effect"
import { DatabaseConfig, HttpConfig, RedisConfig } from "../config/Config.ts"

const LOCAL_HOSTS = new Set(["localhost", "127.0.0.1", "::1", "[::1]", "0.0.0.0", "::", ""])

const localPortOf = (url: string): Option.Option<number> => {
  try {
    const parsed = new URL(url)
    if (!LOCAL_HOSTS.has(parsed.hostname) && !parsed.hostname.startsWith("127.")) return Option.none()
    const port = Number(parsed.port || (parsed.protocol.startsWith("redis") ? 6379 : 5432))
    return Number.isInteger(port) ? Option.some(port) : Option.none()
  } catch {
    return Option.none()
  }
}

/**
 * The ports of this machine the egress proxy never connects to, whatever the
 * allow-list says: the service's own listener, its database and Redis when
 * they are local, and every browser's DevTools port and egress proxy (added
 * and removed as they come and go).
 */
export class LocalPorts extends Context.Service<
  LocalPorts,
  {
    readonly current: () => ReadonlySet<number>
    /** Reserves `port` for the caller's scope. */
    readonly add: (port: number) => Effect.Effect<void, never, Scope.Scope>
  }
>()("rbs/egress/LocalPorts") {
  static readonly layer = Layer.effect(
    LocalPorts,
    Effect.gen(function* () {
      const config = { ...(yield* HttpConfig), ...(yield* DatabaseConfig), ...(yield* RedisConfig) }
      const fixed = new Set<number>([config.port])
      for (const url of [config.databaseUrl, config.redisUrl]) {
        if (Option.isSome(url)) {
          const port = localPortOf(Redacted.value(url.value))
          if (Option.isSome(port)) fixed.add(port.value)
        }
      }
      const dynamic = new Map<number, number>()
      let snapshot: ReadonlySet<number> = new Set(fixed)
      const refresh = () => {
        snapshot = new Set([...fixed, ...dynamic.keys()])
      }
      const add = (port: number) =>
        Effect.acquireRelease(
          Effect.sync(() => {
            dynamic.set(port, (dynamic.get(port) ?? 0) + 1)
            refresh()
          }),
          () =>
            Effect.sync(() => {
              const count = (dynamic.get(port) ?? 1) - 1
              if (count <= 0) dynamic.delete(port)
              else dynamic.set(port, count)
              refresh()
            })
        )
      return LocalPorts.of({ current: () => snapshot, add })
    })
  )
}
