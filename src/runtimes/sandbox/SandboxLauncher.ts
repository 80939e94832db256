import { Clock, Deferred, Effect, Metric, Schema, Scope } from "effect"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import { type EgressListener, EgressProxies } from "../shared/EgressProxy.ts"
import { recordLaunch } from "../../runtime/PoolSizing.ts"
import { Images, type ResolvedImage, run } from "./Images.ts"
import * as OciSpec from "./OciSpec.ts"
import { type HostReady, MKFS, removeMountedDir } from "./SandboxHost.ts"
import { sandboxLaunchSeconds } from "./SandboxMetrics.ts"
import { SupervisorLink } from "./Supervisor.ts"
import { defaultResources, SandboxConfig } from "./SandboxConfig.ts"
import type { ResourceValues } from "../../kernel/SandboxResources.ts"

export class SandboxLaunchError extends Schema.TaggedError<SandboxLaunchError>()("SandboxLaunchError", {
  message: Schema.String,
  cause: Schema.optional(Schema.Defect())
}) {}

/** A running sandbox, before or after it is handed to a session. */
export interface LaunchedSandbox {
  /** Its runc container id. */
  readonly id: string
  /** Its supervisor's host pid. */
  readonly pid: number
  /** The host uid its root is. */
  readonly hostUid: number
  /** Its dir on the host (its writable layer, its bundle, its commands' output). */
  readonly dir: string
  /** Its cgroup path, below each hierarchy's root. */
  readonly cgroupPath: string
  readonly image: ResolvedImage
  /** What its cgroup and disk were launched with (a warm one: the node's defaults). */
  readonly resources: ResourceValues
  readonly link: SupervisorLink
  /** Its egress proxy, bound to no session until the hand-over. */
  readonly egress: EgressListener
  /** Completes when its supervisor (and so the sandbox) is gone. */
  readonly exited: Deferred.Deferred<void>
}

/** How long a new sandbox's supervisor may take to connect back. */
const READY_TIMEOUT = "20 seconds"

const HOSTS = "127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost ip6-loopback\n"
const RESOLV =
  "# No DNS server: this sandbox reaches the network only through its HTTP proxy\n" +
  "# (HTTP_PROXY, HTTPS_PROXY), which resolves names and meters every byte.\n"

const mount = (args: ReadonlyArray<string>) => run("mount", args)
const umount = (path: string) => run("umount", ["--lazy", path]).catch(() => undefined)

/**
 * A sandbox's disk: a sparse file of `bytes` holding an ext4 file system
 * (no journal, nothing reserved: it lives as long as the sandbox), mounted
 * through a loop device at `at`. A write past it fails inside the sandbox
 * with ENOSPC and touches nothing else; deleted files give their blocks back
 * to the host (`discard`). The loop device goes with the unmount.
 */
const makeDisk = async (image: string, at: string, bytes: number) => {
  const file = await Fs.open(image, "wx", 0o600)
  try {
    await file.truncate(bytes)
  } finally {
    await file.close()
  }
  await run(MKFS, ["-q", "-F", "-m", "0", "-O", "^has_journal", "-E", "nodiscard,lazy_itable_init=1", image])
  await mount(["-o", "loop,discard,nosuid,nodev,noatime", image, at])
}

/**
 * A dir of the sandbox's root, made (owned by the sandbox's root) where the
 * image has none. Walked one name at a time without following a link: an
 * image whose `/etc` is a link to `/` must not make the service write on the
 * host's own root.
 */
const dirOwned = async (rootfs: string, path: string, mode: number, uid: number) => {
  let at = rootfs
  for (const name of path.split("/")) {
    at = Path.join(at, name)
    const stat = await Fs.lstat(at).catch(() => undefined)
    if (stat === undefined) {
      await Fs.mkdir(at)
      await Fs.chmod(at, mode)
      await Fs.lchown(at, uid, uid)
    } else if (!stat.isDirectory()) {
      throw new Error(`the image's /${path} is not a directory`)
    }
  }
  return at
}

/** A file the service puts in the sandbox's root (a link the image has there is replaced, never followed). */
const writeOwned = async (rootfs: string, path: string, text: string, uid: number) => {
  const dir = await dirOwned(rootfs, Path.dirname(path), 0o755, uid)
  const target = Path.join(dir, Path.basename(path))
  await Fs.rm(target, { force: true })
  await Fs.writeFile(target, text, { mode: 0o644, flag: "wx" })
  await Fs.lchown(target, uid, uid)
}

/** What a sandbox launched for one session needs: another image, a workspace as its home, other resources. */
export interface SandboxCold {
  readonly image?: string | undefined
  /** An account's image: an OCI layout on this node (its `ref`), unpacked as the store's are. */
  readonly accountImage?: { readonly name: string; readonly dir: string; readonly ref: string } | undefined
  readonly workspaceDir?: string | undefined
  /** Absent: the node's defaults. */
  readonly resources?: ResourceValues | undefined
}

/**
 * How the pool starts one sandbox: a uid range of its own, its image mounted
 * read-only with owners shifted into that range (idmapped) under a writable
 * layer of its own (overlay, on a file system of `SANDBOX_DISK_MB`, or the
 * session's `disk_mb`, in the session's dir), the service's control and
 * egress sockets for it, its egress proxy, and `runc run` of the supervisor
 * under its limits. Everything goes when `scope` closes, in reverse.
 */
export const make = (host: HostReady) =>
  Effect.gen(function* () {
    const config = yield* SandboxConfig
    const images = yield* Images
    const proxies = yield* EgressProxies
    const recentLaunches: Array<number> = []
    const usedSlots = new Set<number>()

    const fail = (message: string) => (cause: unknown) => new SandboxLaunchError({ message, cause })
    const step = <A>(message: string, work: () => Promise<A>) =>
      Effect.tryPromise({ try: work, catch: fail(message) })

    const launch = (scope: Scope.Scope, cold?: SandboxCold) =>
      Effect.gen(function* () {
        const started = yield* Clock.currentTimeMillis
        const resources = cold?.resources ?? defaultResources(config)
        const diskBytes = (resources.disk_mb ?? 0) * 2 ** 20
        const image = yield* (
          cold?.accountImage === undefined
            ? images.resolve(cold?.image ?? config.image)
            : images.resolveLayout(cold.accountImage)
        ).pipe(Effect.mapError((error) => new SandboxLaunchError({ message: error.message, cause: error })))
        const slot = yield* Effect.acquireRelease(
          Effect.sync(() => {
            for (let slot = 0; slot < host.capacity; slot++) {
              if (!usedSlots.has(slot)) {
                usedSlots.add(slot)
                return slot
              }
            }
            return undefined
          }),
          (slot) => Effect.sync(() => slot !== undefined && usedSlots.delete(slot))
        )
        if (slot === undefined) return yield* new SandboxLaunchError({ message: "no free sandbox uid range" })
        const hostUid = host.hostUid(slot)
        const id = `${host.idPrefix}${Crypto.randomBytes(6).toString("hex")}`
        const dir = Path.join(host.sandboxesDir, id)
        const sockets = Path.join(host.socketsDir, id)
        const cgroupPath = Path.posix.join(host.cgroupParent, id)
        // The writable layer (upper and work) is on `disk`: a file system of its own when sized.
        const disk = `${dir}/disk`
        // Where runc reaches from inside the sandbox's user namespace (its root, its home, its sockets) is
        // in the sockets dir, which the sandbox's root may pass through; its data stays in `dir`, in the
        // data dir, which is the service's alone (the kernel found those paths as root, at mount time).
        const layer = {
          lower: `${dir}/lower`,
          upper: `${disk}/upper`,
          work: `${disk}/work`,
          rootfs: `${sockets}/rootfs`
        }

        yield* Effect.acquireRelease(
          step("cannot make the sandbox's dirs", async () => {
            await Fs.mkdir(dir, { mode: 0o700 })
            // Traversable (not listable) by the sandbox's root, whose mounts of its root, home and
            // sockets runc makes from inside the sandbox's user namespace.
            await Fs.mkdir(sockets, { mode: 0o711 })
            for (const path of [layer.lower, layer.rootfs, disk]) await Fs.mkdir(path)
          }),
          () =>
            Effect.promise(async () => {
              // Never through a mount that would not go: at worst the dir stays for the next start.
              await removeMountedDir(dir)
              await removeMountedDir(sockets)
            })
        )
        if (diskBytes > 0) {
          yield* Effect.acquireRelease(
            step("cannot make the sandbox's disk", () => makeDisk(`${dir}/disk.img`, disk, diskBytes)),
            () => Effect.promise(() => umount(disk))
          )
        }
        yield* step("cannot make the sandbox's writable layer", async () => {
          for (const path of [layer.upper, layer.work]) {
            await Fs.mkdir(path)
            await Fs.chown(path, hostUid, hostUid)
          }
        })
        const link = yield* Effect.acquireRelease(
          SupervisorLink.listen(Path.join(sockets, "control.sock"), hostUid).pipe(
            Effect.mapError((error) => fail("cannot listen for the supervisor")(error.cause))
          ),
          (link) => Effect.sync(() => link.close())
        )
        // The sandbox's only way out: its supervisor's forwarder connects to the session's metering
        // proxy here (which counts the bytes on the wire beyond it), as the sandbox's root alone may.
        const egressSocket = Path.join(sockets, "egress.sock")
        const egress = yield* proxies
          .listen(egressSocket)
          .pipe(Effect.mapError(fail("cannot open the egress proxy")))
        yield* step("cannot hand the egress socket to the sandbox", () =>
          Fs.chown(egressSocket, hostUid, hostUid)
        )
        yield* Effect.acquireRelease(
          step("cannot mount the sandbox's image", () =>
            run(host.idmapMount, [image.rootfs, layer.lower, String(hostUid), "65536"])
          ),
          () => Effect.promise(() => umount(layer.lower))
        )
        yield* Effect.acquireRelease(
          step("cannot mount the sandbox's root", () =>
            mount([
              "-t",
              "overlay",
              "overlay",
              "-o",
              `lowerdir=${layer.lower},upperdir=${layer.upper},workdir=${layer.work}`,
              layer.rootfs
            ])
          ),
          () => Effect.promise(() => umount(layer.rootfs))
        )
        // A workspace as its home: idmapped here (runc 1.1 cannot idmap a mount), so the sandbox's
        // root owns what the service's root owns on the disk, and bound over /root in the OCI spec.
        const home = cold?.workspaceDir === undefined ? undefined : `${sockets}/home`
        if (home !== undefined && cold?.workspaceDir !== undefined) {
          const source = yield* step("cannot find the workspace", () => Fs.realpath(cold.workspaceDir!))
          yield* Effect.acquireRelease(
            step("cannot mount the workspace", async () => {
              await Fs.mkdir(home)
              await run(host.idmapMount, [source, home, String(hostUid), "65536", "rw"])
            }),
            () => Effect.promise(() => umount(home))
          )
        }
        yield* step("cannot prepare the sandbox's root", async () => {
          await writeOwned(layer.rootfs, "etc/hosts", HOSTS, hostUid)
          await writeOwned(layer.rootfs, "etc/resolv.conf", RESOLV, hostUid)
          await writeOwned(layer.rootfs, "etc/hostname", "sandbox\n", hostUid)
          // Commands start in the home dir, and programs expect a /tmp: an image may have neither.
          await dirOwned(layer.rootfs, OciSpec.HOME.slice(1), 0o700, hostUid)
          await dirOwned(layer.rootfs, "tmp", 0o1777, hostUid)
          const spec = OciSpec.make({
            rootfs: layer.rootfs,
            hostUid,
            memoryBytes: resources.memory_mb * 2 ** 20,
            tasks: resources.pids,
            openFiles: config.openFiles,
            cpus: resources.cpus,
            cgroupsPath: cgroupPath,
            supervisor: host.supervisor,
            controlSocket: Path.join(sockets, "control.sock"),
            egressSocket,
            imageEnv: image.env,
            limitSwap: host.limitSwap,
            homeSource: home
          })
          await Fs.writeFile(Path.join(dir, "config.json"), JSON.stringify(spec))
        })
        const pid = yield* Effect.acquireRelease(
          step("runc could not start the sandbox", () => host.runc.run(id, dir, Path.join(dir, "runc.log"))),
          // Its processes, its cgroup and runc's state go with it.
          () => Effect.promise(() => host.runc.remove(id).catch(() => undefined))
        )
        const ready = yield* Deferred.await(link.ready).pipe(Effect.timeoutOption(READY_TIMEOUT))
        if (ready._tag === "None") {
          return yield* new SandboxLaunchError({ message: "the sandbox's supervisor did not start" })
        }
        const exited = link.dead

        const seconds = ((yield* Clock.currentTimeMillis) - started) / 1000
        recordLaunch(recentLaunches, seconds)
        yield* Metric.update(sandboxLaunchSeconds, seconds)
        return {
          id,
          pid,
          hostUid,
          dir,
          cgroupPath,
          image,
          resources,
          link,
          egress,
          exited
        } satisfies LaunchedSandbox
      }).pipe(Scope.provide(scope))

    return { launch, recentLaunches }
  })
