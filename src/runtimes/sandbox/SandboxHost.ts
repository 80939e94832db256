import { Context, Effect, Layer } from "effect"
import * as ChildProcess from "node:child_process"
import * as Crypto from "node:crypto"
import * as FsSync from "node:fs"
import * as Fs from "node:fs/promises"
import * as Os from "node:os"
import * as Path from "node:path"
import { NodeConfig } from "../../platform/config/Config.ts"
import { type Availability, AVAILABLE, notAvailable } from "../../runtime/SessionRuntime.ts"
import { makeImages } from "./Images.ts"
import * as Runc from "./Runc.ts"
import {
  defaultSandboxCapacity,
  SandboxConfig,
  type SandboxSettings,
  UIDS_PER_SANDBOX
} from "./SandboxConfig.ts"

/** What this node needs to run sandboxes, found at start. */
export interface HostReady {
  readonly available: true
  readonly runc: Runc.Runc
  /** Parent of each sandbox's dir (its writable layer, its mounts, its bundle). */
  readonly sandboxesDir: string
  /** Parent of each sandbox's sockets: short paths (a socket's path has 107 bytes at most). */
  readonly socketsDir: string
  /** Container ids start with it: `rbs-<tag>-`, one tag per data dir. */
  readonly idPrefix: string
  /** The cgroup path (below the service's own) that holds every sandbox's cgroup. */
  readonly cgroupParent: string
  readonly supervisor: string
  readonly idmapMount: string
  /** Whether the machine accounts swap per cgroup. */
  readonly limitSwap: boolean
  readonly capacity: number
  /** The host uid of a slot's container root. */
  readonly hostUid: (slot: number) => number
}

export type HostState = HostReady | { readonly available: false; readonly reason: string }

/** What makes each sandbox's disk (e2fsprogs). */
export const MKFS = "/usr/sbin/mkfs.ext4"

const executable = (path: string) => {
  try {
    FsSync.accessSync(path, FsSync.constants.X_OK)
    return true
  } catch {
    return false
  }
}

/** `/proc/self/cgroup`'s path of the memory controller (v1) or of the unified hierarchy (v2). */
const ownCgroup = () => {
  const lines = FsSync.readFileSync("/proc/self/cgroup", "utf8").trim().split("\n")
  const parts = lines.map((line) => line.split(":"))
  const memory = parts.find((fields) => fields[1]?.split(",").includes("memory"))
  const unified = parts.find((fields) => fields[1] === "")
  return (memory ?? unified)?.slice(2).join(":") ?? "/"
}

/** Whether `[base, base + count)` lies inside this process's user namespace's uid map. */
const uidsMapped = (base: number, count: number) => {
  const map = FsSync.readFileSync("/proc/self/uid_map", "utf8")
  return map
    .trim()
    .split("\n")
    .map((line) => line.trim().split(/\s+/).map(Number))
    .some(([inside, , length]) => base >= inside! && base + count <= inside! + length!)
}

const mountsUnder = (dir: string) =>
  FsSync.readFileSync("/proc/self/mountinfo", "utf8")
    .split("\n")
    .map((line) => line.split(" ")[4] ?? "")
    .filter((point) => point.startsWith(`${dir}/`))
    // Deepest first: an overlay before the image mounted below it.
    .sort((a, b) => b.length - a.length)

const umount = (path: string) =>
  new Promise<void>((resolve) => ChildProcess.execFile("umount", ["--lazy", path], () => resolve()))

/**
 * Removes a dir that held a sandbox's mounts: unmounted first, and never
 * removed while anything is still mounted below it (a bind mount of the same
 * filesystem is no boundary to `rm --one-file-system`: at worst the dir stays
 * for the next start to clear). Returns whether it is gone.
 */
export const removeMountedDir = async (dir: string): Promise<boolean> => {
  for (const point of mountsUnder(dir)) await umount(point)
  if (mountsUnder(dir).length > 0) return false
  await new Promise((resolve) => ChildProcess.execFile("rm", ["-rf", "--one-file-system", dir], resolve))
  return true
}

/** Where a node of `dataDir` keeps its sandboxes: one tag per data dir keeps two nodes of one machine apart. */
export const hostPaths = (dataDir: string) => {
  const tag = Crypto.createHash("sha256").update(dataDir).digest("hex").slice(0, 8)
  const socketsDir = `/run/rbs-sbx-${tag}`
  return {
    tag,
    sandboxesDir: Path.join(dataDir, "sandboxes"),
    socketsDir,
    runcRoot: Path.join(socketsDir, "runc"),
    cgroupParent: Path.posix.join(ownCgroup(), `rbs-sandboxes-${tag}`)
  }
}

export type HostPaths = ReturnType<typeof hostPaths>

/**
 * Removes what a node that died left: its containers (their processes
 * killed, their cgroups removed), their mounts and dirs, their sockets.
 * Returns how many containers there were. Run before a node's first sandbox,
 * and by `rbs cleanup` for a node that is not started again.
 */
export const removeLeftovers = async (runc: Runc.Runc, paths: HostPaths): Promise<number> => {
  const containers = await runc.list().catch(() => [])
  for (const container of containers) await runc.remove(container.id).catch(() => undefined)
  if (!(await removeMountedDir(paths.sandboxesDir))) {
    throw new Error(`${paths.sandboxesDir} still has mounts: remove them and start again`)
  }
  for (const entry of await Fs.readdir(paths.socketsDir).catch(() => [] as Array<string>)) {
    if (entry === "runc") continue
    // A sandbox's root and home are mounted in its dir here: never removed through a mount.
    if (!(await removeMountedDir(Path.join(paths.socketsDir, entry))))
      throw new Error(`${Path.join(paths.socketsDir, entry)} still has mounts: remove them and start again`)
  }
  return containers.length
}

/** The node's sockets dir and its sandboxes' parent cgroups, once no sandbox is left. */
export const removeHostDirs = async (paths: HostPaths) => {
  // Never through a mount (a sandbox's root or home): those go first, or the dir stays.
  await removeMountedDir(paths.socketsDir).catch(() => false)
  for (const hierarchy of await Fs.readdir("/sys/fs/cgroup").catch(() => [] as Array<string>)) {
    await Fs.rmdir(Path.join("/sys/fs/cgroup", hierarchy, paths.cgroupParent)).catch(() => undefined)
  }
}

/** What the service keeps for itself, its database and its browsers: the sandboxes' default capacity leaves it too. */
export const RESERVED_MEMORY_BYTES = 2 * 2 ** 30

/** The memory all of a node's sandboxes may use together: the machine's, less `RESERVED_MEMORY_BYTES` (1 GiB at least). */
export const sandboxesMemory = (totalMemoryBytes: number) =>
  Math.max(2 ** 30, totalMemoryBytes - RESERVED_MEMORY_BYTES)

/**
 * Bounds the sandboxes' parent cgroup, so all of them together never take
 * the memory the service and its database run in. Each sandbox's own limit
 * is a ceiling, not a reservation (an idle shell uses a few MB), so the
 * limits of a node's sandboxes may add up to more than the machine (bigger
 * `resources.memory_mb`, `MAX_SANDBOXES` set by hand); when what they use
 * does, the kernel kills in the sandboxes' tree (its biggest process), never
 * the service. The v1 memory hierarchy (with swap where it is accounted), or
 * the unified one. Whether it could be set.
 */
export const capSandboxesMemory = async (cgroupParent: string, bytes: number, limitSwap: boolean) => {
  const v1 = Path.join("/sys/fs/cgroup/memory", cgroupParent)
  try {
    if (FsSync.existsSync("/sys/fs/cgroup/memory")) {
      await Fs.mkdir(v1, { recursive: true })
      const memory = Path.join(v1, "memory.limit_in_bytes")
      const memsw = Path.join(v1, "memory.memsw.limit_in_bytes")
      // Memory and swap together may never be below memory alone: lowered memory first, raised it last.
      if (!limitSwap) await Fs.writeFile(memory, String(bytes))
      else
        await Fs.writeFile(memory, String(bytes)).then(
          () => Fs.writeFile(memsw, String(bytes)),
          () => Fs.writeFile(memsw, String(bytes)).then(() => Fs.writeFile(memory, String(bytes)))
        )
      return true
    }
    const v2 = Path.join("/sys/fs/cgroup", cgroupParent)
    await Fs.mkdir(v2, { recursive: true })
    await Fs.writeFile(Path.join(v2, "memory.max"), String(bytes))
    return true
  } catch {
    return false
  }
}

/** `MAX_SANDBOXES`, or what the machine holds when it is not set. */
const capacityOf = (config: SandboxSettings) =>
  config.maxSandboxes ?? defaultSandboxCapacity(Os.totalmem(), Os.availableParallelism(), config.memoryBytes)

/** The native helpers the set-up builds into `nativeDir`. */
const helpersOf = (config: SandboxSettings) => ({
  supervisor: Path.join(config.nativeDir, "rbs-supervisor"),
  idmapMount: Path.join(config.nativeDir, "rbs-idmap-mount")
})

/**
 * Whether this node can run sandboxes: `MAX_SANDBOXES` is not 0, the service
 * runs as root, runc, umoci and the native helpers are there (and mkfs and
 * loop devices for the sandboxes' disks), the host uids each sandbox gets are
 * mapped, and the default image is in the store. When not, the first thing
 * missing and what to do about it. Reads the machine, changes nothing
 * (`rbs doctor` asks it too).
 */
export const sandboxAvailability = (config: SandboxSettings): Effect.Effect<Availability> =>
  Effect.gen(function* () {
    const capacity = capacityOf(config)
    const { supervisor, idmapMount } = helpersOf(config)
    const uid = process.getuid?.()
    const missing =
      capacity <= 0
        ? "MAX_SANDBOXES is 0: set it above 0, or unset it, to run sandboxes"
        : uid !== 0
          ? config.inContainer
            ? `sandboxes need root (each gets a user namespace of its own) and the service runs as uid ${uid ?? "unknown"}: in a container, run it with --privileged --user 0 (see the container guide)`
            : `sandboxes need root (each gets a user namespace of its own) and the service runs as uid ${uid ?? "unknown"}: run it as root (see the sandboxes guide)`
          : !executable(config.runcPath)
            ? `runc was not found at ${config.runcPath}: install it (Debian: apt-get install runc) or set RUNC_PATH`
            : !executable(supervisor) || !executable(idmapMount)
              ? `${config.nativeDir} has no rbs-supervisor or rbs-idmap-mount (npm start or npm test builds them)`
              : !executable("/usr/bin/umoci")
                ? "umoci was not found: install it (Debian: apt-get install umoci)"
                : config.diskBytes > 0 && !executable(MKFS)
                  ? `${MKFS} was not found for the sandboxes' disks: install it (Debian: apt-get install e2fsprogs), or set SANDBOX_DISK_MB=0 for none`
                  : config.diskBytes > 0 && !FsSync.existsSync("/dev/loop-control")
                    ? "there are no loop devices (/dev/loop-control) for the sandboxes' disks: set SANDBOX_DISK_MB=0 for none"
                    : !uidsMapped(config.uidBase, capacity * UIDS_PER_SANDBOX)
                      ? `this user namespace does not map the host uids ${config.uidBase} + ${capacity} x 65536: set SANDBOX_UID_BASE`
                      : undefined
    if (missing !== undefined) return notAvailable(missing)
    if (!(yield* makeImages(config.imagesDir).exists(config.image)))
      return notAvailable(
        `the image "${config.image}" is not in ${config.imagesDir}: npm start builds the default, rbs images import adds others`
      )
    return AVAILABLE
  })

/**
 * The machine's side of sandboxes, checked once at start
 * (`sandboxAvailability`). A node that cannot run them runs none (no places
 * of the kind; the runtime pools log why) and serves browsers as before.
 * Containers, mounts and dirs a crashed run left are removed before any
 * sandbox starts.
 */
export class SandboxHost extends Context.Service<SandboxHost, HostState>()("rbs/sandbox/SandboxHost") {
  static readonly layer = Layer.effect(
    SandboxHost,
    Effect.gen(function* () {
      const service = yield* NodeConfig
      const config = yield* SandboxConfig
      const availability = yield* sandboxAvailability(config)
      if (!availability.available)
        return { available: false, reason: availability.reason } satisfies HostState
      const { supervisor, idmapMount } = helpersOf(config)
      const capacity = capacityOf(config)

      const paths = hostPaths(service.dataDir)
      const { sandboxesDir, socketsDir, cgroupParent } = paths
      const runc = Runc.make(config.runcPath, paths.runcRoot)

      // What a process that died left: its containers, their mounts, their dirs.
      yield* Effect.promise(async () => {
        await Fs.mkdir(socketsDir, { recursive: true, mode: 0o711 })
        await Fs.chmod(socketsDir, 0o711)
        await removeLeftovers(runc, paths)
        // The sandboxes' data (writable layers, disks): the service's alone.
        await Fs.mkdir(sandboxesDir, { recursive: true, mode: 0o700 })
        await Fs.chmod(sandboxesDir, 0o700)
      })
      yield* Effect.addFinalizer(() =>
        Effect.promise(async () => {
          // Every sandbox has gone with its scope by now; anything left is removed all the same.
          for (const container of await runc.list().catch(() => [])) {
            await runc.remove(container.id).catch(() => undefined)
          }
          for (const point of mountsUnder(sandboxesDir)) await umount(point)
          await removeHostDirs(paths)
        })
      )
      const limitSwap = FsSync.existsSync(
        Path.join("/sys/fs/cgroup/memory", ownCgroup(), "memory.memsw.limit_in_bytes")
      )
      const sandboxesMemoryBytes = sandboxesMemory(Os.totalmem())
      const capped = yield* Effect.promise(() =>
        capSandboxesMemory(cgroupParent, sandboxesMemoryBytes, limitSwap)
      )
      if (!capped)
        yield* Effect.logWarning("sandbox.memory_cap_failed", { cgroupParent, bytes: sandboxesMemoryBytes })
      yield* Effect.logInfo("sandbox.host", {
        capacity,
        cgroupParent,
        limitSwap,
        uidBase: config.uidBase,
        sandboxesMemoryBytes
      })
      return {
        available: true,
        runc,
        sandboxesDir,
        socketsDir,
        idPrefix: `rbs-${paths.tag}-`,
        cgroupParent,
        supervisor,
        idmapMount,
        limitSwap,
        capacity,
        hostUid: (slot) => config.uidBase + slot * UIDS_PER_SANDBOX
      } satisfies HostState
    })
  )
}
