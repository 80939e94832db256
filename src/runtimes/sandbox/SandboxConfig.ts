import * as Path from "node:path"
import * as Url from "node:url"

/** What a host (or the environment) says about sandboxes; everything optional. */
export interface SandboxConfigInput {
  /** `MAX_SANDBOXES`: sandboxes this node runs at most; unset derives it from memory and cores. */
  readonly maxSandboxes?: number | undefined
  /** `SANDBOX_POOL_SIZE`: warm sandboxes kept ready. */
  readonly poolSize?: number | undefined
  /** `SANDBOX_MEMORY_MB`, `SANDBOX_MAX_TASKS`, `SANDBOX_CPUS`: the limits of one sandbox. */
  readonly memoryMb?: number | undefined
  readonly maxTasks?: number | undefined
  readonly cpus?: number | undefined
  /** `SANDBOX_IMAGE`: the image of a sandbox created without one. */
  readonly image?: string | undefined
  /** `SANDBOX_IMAGES_DIR`: the node's image store (an OCI layout and the unpacked images). */
  readonly imagesDir?: string | undefined
  /** `SANDBOX_UID_BASE`: the first host uid of the sandboxes' ranges (65,536 each). */
  readonly uidBase?: number | undefined
  /** `RUNC_PATH`. */
  readonly runcPath?: string | undefined
  /** Where `rbs-supervisor` and `rbs-idmap-mount` are (the set-up builds them into `native/build`). */
  readonly nativeDir?: string | undefined
}

export interface SandboxConfig {
  readonly maxSandboxes: number | undefined
  readonly poolSize: number
  readonly memoryBytes: number
  readonly maxTasks: number
  readonly cpus: number
  readonly image: string
  readonly imagesDir: string
  readonly uidBase: number
  readonly runcPath: string
  readonly nativeDir: string
}

/** The image the set-up builds from Debian's packages. */
export const DEFAULT_IMAGE = "debian"

/** Host uids each sandbox's user namespace maps (container uids 0 to 65,535). */
export const UIDS_PER_SANDBOX = 65_536

export const makeSandboxConfig = (input: SandboxConfigInput, dataDir: string): SandboxConfig => ({
  maxSandboxes: input.maxSandboxes,
  poolSize: input.poolSize ?? 2,
  memoryBytes: (input.memoryMb ?? 1024) * 1024 * 1024,
  maxTasks: input.maxTasks ?? 512,
  cpus: input.cpus ?? 1,
  image: input.image ?? DEFAULT_IMAGE,
  imagesDir: Path.resolve(input.imagesDir ?? Path.join(dataDir, "images")),
  uidBase: input.uidBase ?? 1_000_000_000,
  runcPath: input.runcPath ?? "/usr/bin/runc",
  // From src/ and from the build in dist/ alike, the package's own native/build.
  nativeDir: Path.resolve(
    input.nativeDir ?? Url.fileURLToPath(new URL("../../../native/build", import.meta.url))
  )
})

/**
 * `MAX_SANDBOXES` when not set: what the memory holds at each sandbox's limit
 * (2 GiB kept for the service, its database and browsers) and eight a core,
 * whichever is less; at least one. Sandboxes mostly idle (an agent's shell
 * between commands), so a core carries more of them than of browsers.
 */
export const defaultSandboxCapacity = (totalMemoryBytes: number, cores: number, memoryBytes: number) =>
  Math.max(1, Math.min(Math.floor((totalMemoryBytes - 2 * 2 ** 30) / memoryBytes), cores * 8))
