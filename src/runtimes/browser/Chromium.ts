import { Deferred, Effect, Schema, type Scope } from "effect"
import * as ChildProcess from "node:child_process"
import * as FsSync from "node:fs"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import * as Cdp from "../../platform/cdp/CdpClient.ts"
import * as PageFollower from "../../platform/cdp/PageFollower.ts"
import * as Cell from "./Cell.ts"
import * as Spawner from "./Spawner.ts"
import { killGroup, killStarted } from "./Spawner.ts"

export class BrowserLaunchError extends Schema.TaggedError<BrowserLaunchError>()("BrowserLaunchError", {
  message: Schema.String,
  cause: Schema.optional(Schema.Defect())
}) {}

export interface LaunchOptions {
  readonly chromePath: string
  /** Parent of the per-browser profile dirs: marks the browser as this pool's, for `reapOrphans`. */
  readonly profilesDir: string
  /** Where and as whom the browser runs: its cell, user, profile dir, limits and environment. */
  readonly jail: Cell.Jail
  /** The page's viewport, CSS pixels. */
  readonly width: number
  readonly height: number
  /**
   * The browser UI's height above the page, as an earlier launch measured it:
   * the window opens that much taller, so neither this browser nor the
   * windows its contexts open need resizing. A launch that measures another
   * resizes its window, as one without a hint does.
   */
  readonly frameHint?: number | undefined
  /**
   * The hint is settled (launches of this binary with these switches measured
   * it alike): taken as this browser's without measuring it again, which
   * spares each launch four CDP round trips and a DevTools session in its page.
   */
  readonly frameHintSettled?: boolean | undefined
  readonly launchTimeoutMs?: number
  /** More switches after the defaults (the launch bench compares variants with it). */
  readonly extraArgs?: ReadonlyArray<string> | undefined
  /** The user agent every page, worker and request gives; unset: `desktopUserAgent` of this version. */
  readonly userAgent?: string | undefined
  /** The screen it says it has; unset: `SCREEN`. */
  readonly screen?: { readonly width: number; readonly height: number } | undefined
  /** Unpacked extensions it loads (their dirs, shown in its cell); none: extensions are off. */
  readonly extensions?: ReadonlyArray<string> | undefined
}

/**
 * The program to run for `chromePath`. Debian's `/usr/bin/chromium` is a
 * shell script that forks uname, grep, tr and findmnt and sources
 * `/etc/chromium.d` (exporting Google API keys) before it execs
 * `/usr/lib/chromium/chromium` with switches we set ourselves: about 75 ms of
 * CPU per launch (`npm run bench:cost`). The binary it would exec runs
 * instead; any other path runs as it is.
 */
export const executableOf = (chromePath: string): string => {
  const cached = executables.get(chromePath)
  if (cached !== undefined) return cached
  let resolved = chromePath
  try {
    const script = FsSync.readFileSync(chromePath, "latin1").slice(0, 16_384)
    const binary = "/usr/lib/chromium/chromium"
    if (
      script.startsWith("#!") &&
      script.includes("APPNAME=chromium") &&
      script.includes("LIBDIR=/usr/lib/$APPNAME") &&
      script.includes("exec $LIBDIR/$APPNAME")
    ) {
      FsSync.accessSync(binary, FsSync.constants.X_OK)
      resolved = binary
    }
  } catch {
    // Not readable, or no binary beside it: run the path given.
  }
  executables.set(chromePath, resolved)
  return resolved
}
const executables = new Map<string, string>()

/**
 * Why no Chromium can run from `chromePath`, in words for the operator; `undefined` when
 * an executable file is there (whether it starts is its launch's to say).
 */
export const notFoundAt = (chromePath: string): string | undefined => {
  const binary = executableOf(chromePath)
  try {
    if (FsSync.statSync(binary).isFile()) {
      FsSync.accessSync(binary, FsSync.constants.X_OK)
      return undefined
    }
  } catch {
    // Missing, or not executable: said below.
  }
  return `no Chromium was found at ${chromePath}: install it (Debian: apt-get install chromium) or set CHROME_PATH to a Chromium or Chrome executable`
}
/** `Browser.getVersion`'s product by binary (device, inode, mtime). */
const products = new Map<string, string>()

/** A running browser's cell, as its sessions use it. */
export interface BrowserCell extends Cell.CellControl {
  readonly dir: string
  /** Where a proxy listens for the cell's loopback `port` (`forward` it after). */
  readonly egressSocket: (port: number) => string
  /**
   * A loopback port of the cell's no live proxy has (a browser context's, each its own), given
   * back with the caller's scope once the context and its proxy are gone: the ports a shared
   * browser forwards stay as few as its contexts.
   */
  readonly port: Effect.Effect<number, never, Scope.Scope>
}

/** A running Chromium with its own profile dir and a control connection. */
export interface LaunchedBrowser {
  readonly pid: number
  readonly profileDir: string
  /**
   * DevTools browser endpoint: inside the browser's cell, reached from the
   * host through the cell's socket (`ws+unix:`).
   */
  readonly wsEndpoint: string
  /** Its cell: the sockets and the control that reach into it. */
  readonly cell: BrowserCell
  /** e.g. `HeadlessChrome/156.0.8078.79`. */
  readonly product: string
  /** The service's own CDP connection, for screenshots and resizes. */
  readonly control: Cdp.CdpClient
  /** Every page of the browser held on `control` from before it runs (what a session's identity and log set). */
  readonly pages: PageFollower.PageFollower
  /** Height of the emulated browser UI above the page; see `Cdp.measureFrameHeight`. */
  readonly frameHeight: number
  /** Windows opened later (a context's first page) have the launch's viewport without a resize. */
  readonly windowsSized: boolean
  /** Completes when the process exits, for whatever reason. */
  readonly exited: Deferred.Deferred<void>
}

/**
 * The screen a browser says it has (`screen.width` and `height`): a common desktop's, larger than
 * any window the service opens. Headless Chromium's own is 800x600, smaller than its window: a
 * tell no desktop browser gives.
 */
export const SCREEN = { width: 1920, height: 1080 } as const

/**
 * The user agent a desktop Chromium of this `major` version on this machine gives, in Chromium's
 * reduced form (`Chrome/156.0.0.0`): headless Chromium's own says `HeadlessChrome`, which sites
 * that turn bots away read first.
 */
export const desktopUserAgent = (major: string) =>
  `Mozilla/5.0 (X11; Linux ${process.arch === "arm64" ? "aarch64" : "x86_64"}) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/${major}.0.0.0 Safari/537.36`

/**
 * The major version of the Chromium at `chromePath` (`--version`, asked once per binary: its
 * device, inode and mtime), or `undefined` when it does not say.
 */
export const majorVersionOf = (chromePath: string): Effect.Effect<string | undefined> => {
  const binary = executableOf(chromePath)
  const stat = FsSync.statSync(binary, { throwIfNoEntry: false })
  const key = stat === undefined ? undefined : `${stat.dev}:${stat.ino}:${stat.mtimeMs}`
  if (key !== undefined && majors.has(key)) return Effect.succeed(majors.get(key))
  return Effect.callback<string | undefined>((resume) => {
    const child = ChildProcess.execFile(binary, ["--version"], { timeout: 10_000 }, (error, stdout) => {
      const major = error === null ? /(\d+)\.\d+\.\d+\.\d+/.exec(stdout)?.[1] : undefined
      if (key !== undefined) majors.set(key, major)
      resume(Effect.succeed(major))
    })
    return Effect.sync(() => child.kill("SIGKILL"))
  })
}
const majors = new Map<string, string | undefined>()

export const defaultFlags = (options: {
  readonly profileDir: string
  readonly profilesDir: string
  readonly width: number
  readonly height: number
  /** The user agent every page and worker gives (`desktopUserAgent`); unset: Chromium's own. */
  readonly userAgent?: string | undefined
  readonly screen?: { readonly width: number; readonly height: number } | undefined
  readonly extensions?: ReadonlyArray<string> | undefined
}) => [
  // Chromium's own sandbox stays on (never --no-sandbox): renderers run in their own
  // user and PID namespaces under seccomp-bpf, as the jail's unprivileged user.
  "--headless=new",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--no-default-browser-check",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--disable-default-apps",
  ...(options.extensions === undefined || options.extensions.length === 0
    ? ["--disable-extensions"]
    : [
        `--load-extension=${options.extensions.join(",")}`,
        `--disable-extensions-except=${options.extensions.join(",")}`
      ]),
  "--disable-dev-shm-usage",
  // The omnibox's WebUI popups (and the top-chrome WebUI preload) start renderers of their own in
  // every profile and context, though a headless browser never shows them: about half of a launch's
  // CPU, and of a context's (npm run bench:cost).
  // NetworkTimeServiceQuerying: a browser asks clients2.google.com for the time at start, through
  // its egress proxy (refused before its session, metered to the session after).
  "--disable-features=Translate,MediaRouter,OptimizationHints,AutofillServerCommunication,WebUIOmniboxPopup,WebUIOmniboxAimPopup,WebUIOmniboxFullPopup,PreloadTopChromeWebUI,NetworkTimeServiceQuerying",
  // A browser asks Google unasked even with the flags above: its sign-in service lists the
  // profile's Google accounts (accounts.google.com/ListAccounts) once its network is up, and the
  // component updater fetches models on demand (update.googleapis.com). Both are pointed at port 9,
  // which Chromium refuses to connect to at all (a restricted port): no request leaves the browser.
  "--gaia-url=http://127.0.0.1:9",
  "--component-updater=url-source=http://127.0.0.1:9",
  "--disable-renderer-backgrounding",
  "--disable-background-timer-throttling",
  "--disable-backgrounding-occluded-windows",
  "--metrics-recording-only",
  "--mute-audio",
  "--password-store=basic",
  "--use-mock-keychain",
  // Hides the "unsupported command-line flag" bar some of these flags bring, which would eat viewport.
  "--test-type",
  // No headless tell by default: `navigator.webdriver` false, a desktop's screen, and the user agent
  // of a desktop Chromium of the same version (every page and worker of every context alike).
  "--disable-blink-features=AutomationControlled",
  `--screen-info={0,0 ${(options.screen ?? SCREEN).width}x${(options.screen ?? SCREEN).height}}`,
  ...(options.userAgent === undefined ? [] : [`--user-agent=${options.userAgent}`]),
  "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
  // Inside the browser's cell: no other network namespace has this port, the host's included.
  "--remote-debugging-address=127.0.0.1",
  `--remote-debugging-port=${Cell.DEVTOOLS_PORT}`,
  // The cell's one way out, its egress proxy; loopback too goes there.
  `--proxy-server=http://127.0.0.1:${Cell.PROXY_PORT}`,
  "--proxy-bypass-list=<-loopback>",
  `--window-size=${options.width},${options.height}`,
  `--user-data-dir=${options.profileDir}`,
  // Marks the browser as ours for `reapOrphans`, wherever its profile lives.
  `${POOL_MARKER}${options.profilesDir}`,
  "about:blank"
]

export { killGroup } from "./Spawner.ts"

/** An unknown switch Chromium ignores, naming the pool a browser belongs to. */
const POOL_MARKER = "--rbs-pool="

/**
 * Launches Chromium in its own process group and profile dir. The scope owns
 * it: closing the scope disconnects, kills the group, waits for the exit and
 * removes the profile dir.
 */
export const launch = Effect.fn("Chromium.launch")(function* (options: LaunchOptions) {
  const profileDir = options.jail.profileDir
  const exited = yield* Deferred.make<void>()
  const timeoutMs = options.launchTimeoutMs ?? 30_000
  const major = yield* majorVersionOf(options.chromePath)
  const userAgent = options.userAgent ?? (major === undefined ? undefined : desktopUserAgent(major))
  const child = yield* Effect.acquireRelease(
    Effect.tryPromise({
      try: async () => {
        const flags = defaultFlags({
          ...options,
          height: options.height + (options.frameHint ?? 0),
          profileDir,
          userAgent
        })
        // Switches go before the initial URL, the last argument.
        if (options.extraArgs !== undefined) flags.splice(flags.length - 1, 0, ...options.extraArgs)
        const command = options.jail.command(executableOf(options.chromePath), flags)
        const child = await Spawner.start(command.file, command.args, options.jail.env, timeoutMs)
        void child.exited.then(() => Deferred.doneUnsafe(exited, Effect.void))
        return child
      },
      catch: (cause) => new BrowserLaunchError({ message: `cannot start ${options.chromePath}`, cause })
    }),
    (child) =>
      Effect.suspend(() => {
        // The cell's first process ends the cell (its init, and with it everything in it) and exits
        // once nothing of it is left: its exit says the browser is gone, helpers and all.
        if (!child.hasExited()) process.kill(child.pid, "SIGTERM")
        return Deferred.await(exited)
      }).pipe(
        Effect.timeout("5 seconds"),
        // It did not: its whole group, which nothing of it leaves.
        Effect.catch(() =>
          Effect.sync(() => killStarted(child.pid)).pipe(
            Effect.andThen(Deferred.await(exited)),
            Effect.timeout("5 seconds")
          )
        ),
        Effect.ignore
      )
  )
  const cellDir = options.jail.cellDir
  const wsEndpoint = yield* Effect.tryPromise({
    try: () => child.endpoint.then((printed) => Cell.hostEndpoint(cellDir, printed)),
    catch: (cause) =>
      new BrowserLaunchError({
        message: /No usable sandbox|namespace/i.test(String(cause))
          ? "Chromium cannot start its sandbox: it needs unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, or kernel.apparmor_restrict_unprivileged_userns=0 on Ubuntu; in a container, a seccomp profile that allows clone/unshare of user namespaces). The service never runs Chromium with --no-sandbox."
          : "Chromium did not start",
        cause
      })
  })
  const control = yield* Cdp.connect(wsEndpoint).pipe(
    Effect.mapError((cause) => new BrowserLaunchError({ message: "cannot connect to Chromium", cause }))
  )
  const pages = yield* PageFollower.make(control).pipe(
    Effect.mapError(
      (cause) => new BrowserLaunchError({ message: "cannot follow the browser's pages", cause })
    )
  )
  const cellControl = yield* Cell.control(cellDir).pipe(
    Effect.mapError((cause) => new BrowserLaunchError({ message: cause.message, cause }))
  )
  const freePorts: Array<number> = []
  let lastPort = Cell.PROXY_PORT
  const cell: BrowserCell = {
    ...cellControl,
    dir: cellDir,
    egressSocket: (port) => Cell.egressSocket(cellDir, port),
    port: Effect.acquireRelease(
      Effect.sync(() => freePorts.pop() ?? ++lastPort),
      (port) => Effect.sync(() => freePorts.push(port))
    )
  }
  // The same binary (same inode, same mtime) reports the same product: asked once per binary.
  const binary = FsSync.statSync(executableOf(options.chromePath), { throwIfNoEntry: false })
  const productKey = binary === undefined ? undefined : `${binary.dev}:${binary.ino}:${binary.mtimeMs}`
  const known = productKey === undefined ? undefined : products.get(productKey)
  const product =
    known ??
    (yield* control.send<{ product: string }>("Browser.getVersion").pipe(
      Effect.map((version) => version.product),
      Effect.mapError((cause) => new BrowserLaunchError({ message: "Chromium did not answer", cause }))
    ))
  if (productKey !== undefined) products.set(productKey, product)
  // The window includes the emulated toolbar: grow it so the viewport is exactly width x height.
  const frameHeight =
    options.frameHintSettled === true && options.frameHint !== undefined
      ? options.frameHint
      : yield* Effect.gen(function* () {
          const frame = yield* Cdp.measureFrameHeight(control)
          if (frame !== (options.frameHint ?? 0))
            yield* Cdp.resize(control, options.width, options.height, frame)
          return frame
        }).pipe(
          Effect.mapError(
            (cause) => new BrowserLaunchError({ message: "cannot size the browser window", cause })
          )
        )
  return {
    pid: child.pid,
    profileDir,
    wsEndpoint,
    cell,
    product,
    control,
    pages,
    frameHeight,
    windowsSized: frameHeight === (options.frameHint ?? 0),
    exited
  } satisfies LaunchedBrowser
})

/** "Chromium 156 headless, 1280x720" from `Chrome/156.0.8078.79` (we always run headless). */
export const describeDevice = (product: string, width: number, height: number) => {
  const major = /\/(\d+)\./.exec(product)?.[1] ?? "?"
  return `Chromium ${major} headless, ${width}x${height}`
}

/**
 * Pids of processes whose command line names a profile dir under
 * `profilesDir`, or marks them as that pool's (Linux `/proc`).
 */
export const findProcessesUsing = async (profilesDir: string): Promise<Array<number>> => {
  const needles = [`--user-data-dir=${profilesDir}${Path.sep}`, `${POOL_MARKER}${profilesDir}\0`]
  const pids = await Fs.readdir("/proc").catch(() => [] as Array<string>)
  const found: Array<number> = []
  for (const pid of pids) {
    if (!/^\d+$/.test(pid)) continue
    const cmdline = await Fs.readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => "")
    if (needles.some((needle) => cmdline.includes(needle))) found.push(Number(pid))
  }
  return found
}

/**
 * Browsers a crashed process left behind: kill every Chromium still running on
 * a profile dir under `profilesDir`, then remove the dirs.
 */
export const reapOrphans = Effect.fn("Chromium.reapOrphans")(function* (profilesDir: string) {
  const pids = yield* Effect.promise(() => findProcessesUsing(profilesDir))
  for (const pid of pids) killGroup(pid)
  const entries = yield* Effect.promise(() => Fs.readdir(profilesDir).catch(() => [] as Array<string>))
  for (const entry of entries) {
    yield* Effect.promise(() =>
      Fs.rm(Path.join(profilesDir, entry), { recursive: true, force: true, maxRetries: 3 })
    )
  }
  if (pids.length > 0 || entries.length > 0) {
    yield* Effect.logWarning("browser.orphans.reaped", { processes: pids.length, profiles: entries.length })
  }
  return { processes: pids.length, profiles: entries.length }
})
