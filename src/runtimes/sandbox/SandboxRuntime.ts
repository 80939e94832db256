import { Deferred, Effect, Scope } from "effect"
import * as Os from "node:os"
import * as Path from "node:path"
import {
  type LaunchSpec,
  RuntimeLaunchError,
  type RuntimePool,
  type SandboxRuntime,
  unavailable
} from "../../runtime/SessionRuntime.ts"
import * as WarmPool from "../../runtime/WarmPool.ts"
import { Commands } from "./Commands.ts"
import { Terminals } from "./Terminals.ts"
import * as Watches from "./Watches.ts"
import { SandboxHost } from "./SandboxHost.ts"
import { selfTest } from "./SelfTest.ts"
import * as SandboxLauncher from "./SandboxLauncher.ts"
import { sandboxesLive, sandboxPoolAcquires, sandboxPoolIdle, sandboxPoolTarget } from "./SandboxMetrics.ts"
import { defaultResources, SandboxConfig } from "./SandboxConfig.ts"
import { oomKillsOf } from "./OomKills.ts"

/** A sandbox's `device`: its image and limits. */
export const describeSandbox = (image: string, cpus: number, memoryBytes: number) =>
  `sandbox ${image}, ${cpus} CPU, ${Math.round(memoryBytes / 2 ** 20)} MB`

/**
 * Sandboxes as a session runtime: warm ones of the default image kept ready
 * (a sandbox of another image is launched for its session), never reused by
 * a second session. At hand-over its egress is bound to the session's
 * region, and it gets its command registry and terminals. On a node that
 * runs no sandboxes (`MAX_SANDBOXES=0`, no runc, not root), a pool with no places.
 */
export const pool = Effect.gen(function* () {
  const host = yield* SandboxHost
  if (!host.available) return unavailable("sandbox", host.reason)
  const config = yield* SandboxConfig
  const launcher = yield* SandboxLauncher.make(host)
  const warm = yield* WarmPool.make({
    noun: "sandbox",
    capacitySetting: "MAX_SANDBOXES",
    capacity: host.capacity,
    floor: Math.max(0, config.poolSize),
    maxParallelLaunches: Math.max(2, Os.availableParallelism()),
    launch: (scope: Scope.Scope, cold?: SandboxLauncher.SandboxCold) => launcher.launch(scope, cold),
    isAlive: (launched) => !Deferred.isDoneUnsafe(launched.exited),
    recentLaunches: launcher.recentLaunches,
    metrics: {
      idle: sandboxPoolIdle,
      target: sandboxPoolTarget,
      live: sandboxesLive,
      acquires: sandboxPoolAcquires
    },
    failure: (message) => new SandboxLauncher.SandboxLaunchError({ message })
  })

  const defaults = defaultResources(config)

  const acquire = (spec: LaunchSpec) =>
    Effect.gen(function* () {
      const image = spec.image ?? config.image
      const resources = spec.resources ?? defaults
      // On a workspace: its disk as the home, in a sandbox launched for it.
      const workspaceDir = spec.home?.dir
      // An account's image is never a warm one's, whatever its name; a disk of another size is made at
      // launch: a warm one cannot be resized.
      const accountImage = spec.accountImage
      const launched = yield* warm.acquire(
        image === config.image &&
          workspaceDir === undefined &&
          accountImage === undefined &&
          resources.disk_mb === defaults.disk_mb
          ? undefined
          : {
              ...(image === config.image ? {} : { image }),
              ...(accountImage === undefined ? {} : { accountImage: { name: image, ...accountImage } }),
              ...(workspaceDir === undefined ? {} : { workspaceDir }),
              resources
            }
      )
      // Other CPUs, memory or processes: the warm one's cgroup changed in place before any command runs.
      if (
        resources.cpus !== launched.resources.cpus ||
        resources.memory_mb !== launched.resources.memory_mb ||
        resources.pids !== launched.resources.pids
      )
        yield* Effect.tryPromise({
          try: () =>
            host.runc.update(launched.id, {
              memoryBytes: resources.memory_mb * 2 ** 20,
              tasks: resources.pids,
              cpus: resources.cpus,
              limitSwap: host.limitSwap
            }),
          catch: (cause) =>
            new SandboxLauncher.SandboxLaunchError({ message: "cannot set the sandbox's limits", cause })
        }).pipe(Effect.withSpan("SandboxPool.update"))
      // Every read a command makes is remembered: a kill for memory none of them saw, at the
      // sandbox's death, was its supervisor's.
      const readOomKills = oomKillsOf(launched.cgroupPath)
      let oomKillsSeen = readOomKills()
      const countOomKills = () => (oomKillsSeen = Math.max(oomKillsSeen, readOomKills()))
      const commands = yield* Effect.acquireRelease(
        Effect.sync(() => new Commands(launched.link, Path.join(launched.dir, "commands"), countOomKills)),
        (commands) => Effect.sync(() => commands.close())
      )
      const watches = yield* Effect.acquireRelease(
        Effect.sync(() => Watches.make(launched.link)),
        (watches) => Effect.sync(() => watches.close())
      )
      const terminals = new Terminals()
      // What crosses the gateway is the session's traffic too: billed with what its proxy counts.
      const gateway = { up: 0, down: 0 }
      const tap = launched.egress.bind(spec.region)
      return {
        kind: "sandbox",
        pid: launched.pid,
        device: describeSandbox(launched.image.name, resources.cpus, resources.memory_mb * 2 ** 20),
        egress: {
          ...tap,
          counters: () => {
            const proxied = tap.counters()
            return { bytesUp: proxied.bytesUp + gateway.up, bytesDown: proxied.bytesDown + gateway.down }
          }
        },
        exited: launched.exited,
        crashReason: "sandbox_crashed",
        diedOf: Effect.sync(() => (readOomKills() > oomKillsSeen ? "memory_limit" : undefined)),
        // A command started in the background keeps the sandbox in use until it exits.
        busy: () => commands.list().some((command) => command.running),
        serve: Effect.void,
        resize: (cols, rows) => Effect.sync(() => terminals.resizeAll(cols, rows)),
        selfTest: selfTest(
          { commands, cgroupPath: launched.cgroupPath, egress: tap },
          { memoryBytes: resources.memory_mb * 2 ** 20, tasks: resources.pids }
        ),
        exec: { commands, files: launched.link, watches },
        pty: {
          spawn: (request, listener) => launched.link.spawn(request, listener),
          size: () => terminals.size,
          onResize: (resize) => terminals.add(resize)
        },
        gateway: {
          dial: (port) => launched.link.dial(port),
          count: (up, down) => {
            gateway.up += up
            gateway.down += down
          }
        }
      } satisfies SandboxRuntime
    }).pipe(
      Effect.mapError((error) => new RuntimeLaunchError({ message: error.message, cause: error })),
      Effect.withSpan("SandboxPool.acquire")
    )

  return {
    kind: "sandbox",
    acquire,
    retire: warm.retire,
    idle: warm.idle,
    target: warm.target,
    capacity: warm.capacity,
    ready: warm.ready
  } satisfies RuntimePool
})
