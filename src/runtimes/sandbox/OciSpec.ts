import { CPU_PERIOD_US, cpuQuota } from "./Runc.ts"
import * as Seccomp from "./Seccomp.ts"
import { UIDS_PER_SANDBOX } from "./SandboxConfig.ts"

/**
 * Where the supervisor and the service's two sockets are inside every
 * sandbox. The sockets are files the service listens on, each bind-mounted
 * read-only: the supervisor connects out to them, and nothing in the sandbox
 * can replace them (the service never opens a path the sandbox controls).
 */
export const SUPERVISOR_IN_SANDBOX = "/.rbs/supervisor"
export const CONTROL_SOCKET_IN_SANDBOX = "/.rbs/control.sock"
export const EGRESS_SOCKET_IN_SANDBOX = "/.rbs/egress.sock"
/** The in-sandbox address of its egress proxy (the supervisor forwards it to the session's proxy). */
export const PROXY_PORT = 3128
export const HOME = "/root"

/**
 * The capabilities a sandbox's root keeps: the usual container default, all
 * of them confined to its own user namespace (they act only on what that
 * namespace owns). Enough for package managers (chown, setuid to a package's
 * user) and ordinary servers (ports below 1024); no `CAP_SYS_ADMIN`,
 * `CAP_NET_ADMIN` or `CAP_NET_RAW`.
 */
export const CAPABILITIES = [
  "CAP_CHOWN",
  "CAP_DAC_OVERRIDE",
  "CAP_FSETID",
  "CAP_FOWNER",
  "CAP_MKNOD",
  "CAP_SETGID",
  "CAP_SETUID",
  "CAP_SETFCAP",
  "CAP_SETPCAP",
  "CAP_NET_BIND_SERVICE",
  "CAP_SYS_CHROOT",
  "CAP_KILL",
  "CAP_AUDIT_WRITE"
]

/** The environment every command starts with (a request's `env` goes over it). */
export const sandboxEnv = (image: ReadonlyArray<string>) => {
  const proxy = `http://127.0.0.1:${PROXY_PORT}`
  const fixed: Record<string, string> = {
    HOME,
    LANG: "C.UTF-8",
    TERM: "xterm-256color",
    // Both spellings: curl reads only the lowercase http_proxy, others only the uppercase.
    HTTP_PROXY: proxy,
    HTTPS_PROXY: proxy,
    http_proxy: proxy,
    https_proxy: proxy,
    NO_PROXY: "localhost,127.0.0.1,::1",
    no_proxy: "localhost,127.0.0.1,::1"
  }
  const merged = new Map<string, string>()
  for (const entry of image) {
    const eq = entry.indexOf("=")
    if (eq > 0) merged.set(entry.slice(0, eq), entry.slice(eq + 1))
  }
  if (!merged.has("PATH")) merged.set("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
  for (const [name, value] of Object.entries(fixed)) merged.set(name, value)
  return [...merged].map(([name, value]) => `${name}=${value}`)
}

export interface SpecInput {
  /** The sandbox's root: the overlay of its image and its own writable layer. */
  readonly rootfs: string
  /** The first host uid of its range: its root is this uid on the host. */
  readonly hostUid: number
  readonly memoryBytes: number
  readonly tasks: number
  /** `RLIMIT_NOFILE` of its processes. */
  readonly openFiles: number
  readonly cpus: number
  /** Its cgroup, below the service's own. */
  readonly cgroupsPath: string
  /** The supervisor binary on the host, mounted read-only into the sandbox. */
  readonly supervisor: string
  /** The service's control socket for this sandbox (the supervisor's operations). */
  readonly controlSocket: string
  /** The service's egress socket for this sandbox (to the session's metering proxy). */
  readonly egressSocket: string
  /** The image's own `Env` (its `PATH`). */
  readonly imageEnv: ReadonlyArray<string>
  /** Whether the machine accounts swap per cgroup: then memory and swap together stay under the limit. */
  readonly limitSwap: boolean
  /** A workspace's dir, mounted (idmapped, on the host) as the home: what the sandbox writes there stays. */
  readonly homeSource?: string | undefined
}

const NO_EXEC = ["nosuid", "noexec", "nodev"]

/** The runc `config.json` of a sandbox. */
export const make = (input: SpecInput) => ({
  ociVersion: "1.0.2",
  process: {
    terminal: false,
    user: { uid: 0, gid: 0 },
    args: [
      SUPERVISOR_IN_SANDBOX,
      "--control",
      CONTROL_SOCKET_IN_SANDBOX,
      "--egress",
      EGRESS_SOCKET_IN_SANDBOX,
      "--proxy-port",
      String(PROXY_PORT)
    ],
    env: sandboxEnv(input.imageEnv),
    cwd: HOME,
    capabilities: {
      bounding: CAPABILITIES,
      effective: CAPABILITIES,
      permitted: CAPABILITIES,
      inheritable: [],
      ambient: []
    },
    noNewPrivileges: true,
    // Without them runc passes on its own (the service's): a sandbox's process could hold a million files.
    rlimits: [{ type: "RLIMIT_NOFILE", hard: input.openFiles, soft: input.openFiles }]
  },
  root: { path: input.rootfs, readonly: false },
  hostname: "sandbox",
  mounts: [
    { destination: "/proc", type: "proc", source: "proc", options: NO_EXEC },
    {
      destination: "/dev",
      type: "tmpfs",
      source: "tmpfs",
      options: ["nosuid", "strictatime", "mode=755", "size=65536k"]
    },
    {
      destination: "/dev/pts",
      type: "devpts",
      source: "devpts",
      options: ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"]
    },
    {
      destination: "/dev/shm",
      type: "tmpfs",
      source: "shm",
      options: [...NO_EXEC, "mode=1777", "size=65536k"]
    },
    { destination: "/dev/mqueue", type: "mqueue", source: "mqueue", options: NO_EXEC },
    { destination: "/sys", type: "sysfs", source: "sysfs", options: [...NO_EXEC, "ro"] },
    {
      destination: SUPERVISOR_IN_SANDBOX,
      type: "bind",
      source: input.supervisor,
      options: ["bind", "ro", "nosuid", "nodev"]
    },
    {
      destination: CONTROL_SOCKET_IN_SANDBOX,
      type: "bind",
      source: input.controlSocket,
      options: ["bind", "ro", ...NO_EXEC]
    },
    {
      destination: EGRESS_SOCKET_IN_SANDBOX,
      type: "bind",
      source: input.egressSocket,
      options: ["bind", "ro", ...NO_EXEC]
    },
    // Its flags repeat the host mount's: runc remounts inside the sandbox's user namespace, where
    // they are locked.
    ...(input.homeSource === undefined
      ? []
      : [
          {
            destination: HOME,
            type: "bind",
            source: input.homeSource,
            options: ["rbind", "rw", "nosuid", "nodev"]
          }
        ])
  ],
  linux: {
    uidMappings: [{ containerID: 0, hostID: input.hostUid, size: UIDS_PER_SANDBOX }],
    gidMappings: [{ containerID: 0, hostID: input.hostUid, size: UIDS_PER_SANDBOX }],
    namespaces: [
      { type: "pid" },
      // A network namespace of its own: loopback only. Its way out is the supervisor's forwarder.
      { type: "network" },
      { type: "ipc" },
      { type: "uts" },
      { type: "mount" },
      { type: "user" },
      { type: "cgroup" }
    ],
    cgroupsPath: input.cgroupsPath,
    resources: {
      memory: input.limitSwap
        ? { limit: input.memoryBytes, swap: input.memoryBytes }
        : { limit: input.memoryBytes },
      pids: { limit: input.tasks },
      cpu: { period: CPU_PERIOD_US, quota: cpuQuota(input.cpus) },
      devices: [{ allow: false, access: "rwm" }]
    },
    seccomp: Seccomp.profile(),
    maskedPaths: [
      "/proc/acpi",
      "/proc/asound",
      "/proc/kcore",
      "/proc/keys",
      "/proc/latency_stats",
      "/proc/timer_list",
      "/proc/timer_stats",
      "/proc/sched_debug",
      "/proc/scsi",
      "/sys/firmware",
      "/sys/devices/virtual/powercap"
    ],
    readonlyPaths: ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"]
  }
})
