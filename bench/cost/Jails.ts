// The service's browser jail (`BrowserIsolation`: own uid, cgroup, nice,
// prlimit, profile and temp dirs) built in the bench's process, so the launch
// variants and the helpers' calibration run what the pool runs.
import { Context, Effect, Exit, Layer, References, Scope } from "effect"
import * as Fs from "node:fs/promises"
import * as Os from "node:os"
import * as Path from "node:path"
import { BrowserIsolation, type IsolationInfo, type Jail } from "../../src/runtimes/browser/Isolation.ts"
import { ServiceConfig } from "../../src/platform/config/Config.ts"
import { BrowserConfig } from "../../src/runtimes/browser/BrowserConfig.ts"

export interface OpenJail {
  readonly jail: Jail
  /** Kills what still runs in it, removes its cgroup and dirs, frees its uid. */
  readonly close: () => Promise<void>
}

export interface Jails {
  readonly info: IsolationInfo
  readonly enter: () => Promise<OpenJail>
  readonly close: () => Promise<void>
}

export const openJails = async (): Promise<Jails> => {
  const dataDir = await Fs.mkdtemp(Path.join(Os.tmpdir(), "rbs-cost-jails-"))
  await Fs.chmod(dataDir, 0o755)
  const scope = Effect.runSync(Scope.make())
  const close = async () => {
    await Effect.runPromise(Scope.close(scope, Exit.void))
    await Fs.rm(dataDir, { recursive: true, force: true, maxRetries: 3 })
  }
  const layer = BrowserIsolation.layer.pipe(
    Layer.provideMerge(BrowserConfig.layer),
    Layer.provideMerge(ServiceConfig.layer({ dataDir, logLevel: "Warn" })),
    Layer.provide(Layer.succeed(References.MinimumLogLevel, "Warn"))
  )
  const isolation = await Effect.runPromise(Layer.buildWithScope(layer, scope)).then(
    (context) => Context.get(context, BrowserIsolation),
    async (error) => {
      await close()
      throw error
    }
  )
  const enter = async (): Promise<OpenJail> => {
    const jailScope = Effect.runSync(Scope.make())
    const jail = await Effect.runPromise(isolation.enter().pipe(Scope.provide(jailScope)))
    return { jail, close: () => Effect.runPromise(Scope.close(jailScope, Exit.void)) }
  }
  return { info: isolation.info, enter, close }
}
