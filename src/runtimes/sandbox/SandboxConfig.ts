import { Context, Effect, Layer } from "effect"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Url from "node:url"
import { ConfigInputs, NodeConfig } from "../../platform/config/Config.ts"
import type { SandboxConfigInput } from "../../platform/config/ConfigInput.ts"
import type { ResourceValues } from "../../kernel/SandboxResources.ts"

/** A node's sandboxes: their capacity, pool, limits and images. */
export interface SandboxSettings {
  readonly maxSandboxes: number | undefined
  readonly poolSize: number
  readonly memoryBytes: number
  readonly maxTasks: number
  /** `RLIMIT_NOFILE` of each of its processes (runc would pass on the service's own). */
  readonly openFiles: number
  readonly cpus: number
  /** The size of a sandbox's writable layer (a file system of its own); 0: none, the data dir's. */
  readonly diskBytes: number
  /**
   * The most `resources` at create may ask for one sandbox
   * (`SANDBOX_RESOURCES_MAX_*`), never below the defaults above; `disk_mb`
   * null when sandboxes have no disk of their own.
   */
  readonly maxima: ResourceValues
  readonly image: string
  readonly imagesDir: string
  readonly uidBase: number
  readonly runcPath: string
  readonly nativeDir: string
  /** From the service's container image (`RBS_CONTAINER`): a refusal names the container's options. */
  readonly inContainer: boolean
}

/** The image the set-up builds from Debian's packages. */
export const DEFAULT_IMAGE = "debian"

/** Host uids each sandbox's user namespace maps (container uids 0 to 65,535). */
export const UIDS_PER_SANDBOX = 65_536

/** A maximum's default: this many times the default of one sandbox. */
export const MAXIMUM_FACTOR = 4

export const makeSandboxConfig = (
  input: SandboxConfigInput,
  dataDir: string,
  inContainer = false,
  cores = Os.availableParallelism()
): SandboxSettings => {
  const memoryMb = input.memoryMb ?? 1024
  const maxTasks = input.maxTasks ?? 512
  const cpus = input.cpus ?? 1
  const diskMb = input.diskMb ?? 2048
  return {
    maxSandboxes: input.maxSandboxes,
    poolSize: input.poolSize ?? 2,
    memoryBytes: memoryMb * 1024 * 1024,
    maxTasks,
    openFiles: input.openFiles ?? 4096,
    cpus,
    diskBytes: diskMb * 1024 * 1024,
    maxima: {
      // A sandbox can use no more cores than the machine has.
      cpus: Math.max(cpus, input.maxCpus ?? cores),
      memory_mb: Math.max(memoryMb, input.maxMemoryMb ?? memoryMb * MAXIMUM_FACTOR),
      disk_mb: diskMb === 0 ? null : Math.max(diskMb, input.maxDiskMb ?? diskMb * MAXIMUM_FACTOR),
      pids: Math.max(maxTasks, input.maxPids ?? maxTasks * MAXIMUM_FACTOR)
    },
    image: input.image ?? DEFAULT_IMAGE,
    imagesDir: Path.resolve(input.imagesDir ?? Path.join(dataDir, "images")),
    uidBase: input.uidBase ?? 1_000_000_000,
    runcPath: input.runcPath ?? "/usr/bin/runc",
    // From src/ and from the build in dist/ alike, the package's own native/build.
    nativeDir: Path.resolve(
      input.nativeDir ?? Url.fileURLToPath(new URL("../../../native/build", import.meta.url))
    ),
    inContainer
  }
}

/** The resources of a sandbox created without `resources`: the node's `SANDBOX_CPUS`, `SANDBOX_MEMORY_MB`, `SANDBOX_DISK_MB`, `SANDBOX_MAX_TASKS`. */
export const defaultResources = (config: SandboxSettings): ResourceValues => ({
  cpus: config.cpus,
  memory_mb: Math.round(config.memoryBytes / 2 ** 20),
  disk_mb: config.diskBytes === 0 ? null : Math.round(config.diskBytes / 2 ** 20),
  pids: config.maxTasks
})

/**
 * `MAX_SANDBOXES` when not set: what the memory holds at each sandbox's limit
 * (2 GiB kept for the service, its database and browsers) and eight a core,
 * whichever is less; at least one. Sandboxes mostly idle (an agent's shell
 * between commands), so a core carries more of them than of browsers.
 */
export const defaultSandboxCapacity = (totalMemoryBytes: number, cores: number, memoryBytes: number) =>
  Math.max(1, Math.min(Math.floor((totalMemoryBytes - 2 * 2 ** 30) / memoryBytes), cores * 8))

/** The sandbox settings in force (`MAX_SANDBOXES`, `SANDBOX_*`, `RUNC_PATH`). */
export class SandboxConfig extends Context.Service<SandboxConfig, SandboxSettings>()(
  "rbs/sandbox/SandboxConfig"
) {
  static readonly layer = Layer.effect(
    SandboxConfig,
    Effect.gen(function* () {
      const input = yield* ConfigInputs
      const { dataDir } = yield* NodeConfig
      return makeSandboxConfig(input.sandbox ?? {}, dataDir, input.inContainer ?? false)
    })
  )
}
