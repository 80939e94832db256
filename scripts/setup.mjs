// Runs before `npm start` and `npm test` on whatever Node the machine has:
// installs npm dependencies when they are missing or stale, builds the
// dashboard (`web/` into `web/dist`) when its build is missing or older than
// its sources, installs Chromium from Debian's package when no browser is
// found, Debian's ffmpeg (session recordings are encoded with it), gcc and
// the native helpers it compiles (native/: the cell every browser runs in,
// and its launcher), Debian's redis-server for `npm run cluster` with
// REDIS_PORT, and (for `npm test`, which runs the shared rate limits against a
// real Redis and checks SSH keys against ssh-keygen) Debian's redis-server and
// openssh-client, and as root Debian's podman, buildah and podman-compose (the
// container image and compose tests) and Debian's docker-registry and apache2-utils (the image
// tests' registries). As root, for sandbox sessions: Debian's runc, umoci,
// mmdebstrap, skopeo and e2fsprogs, the sandbox supervisor, and the default
// sandbox image built from Debian's packages (scripts/sandbox-setup.mjs).
// Plain Node, no dependencies.
import { execFileSync, spawnSync } from "node:child_process"
import { accessSync, constants, existsSync, readdirSync, statSync } from "node:fs"
import { join } from "node:path"
import { buildDefaultImage, buildNative, imagesDirFromEnv } from "./sandbox-setup.mjs"

const log = (message) => process.stderr.write(`[setup] ${message}\n`)
const forTests = process.argv.includes("--test")

const needsInstall = () => {
  const marker = "node_modules/.package-lock.json"
  if (!existsSync(marker)) return true
  return statSync("package-lock.json").mtimeMs > statSync(marker).mtimeMs
}

if (needsInstall()) {
  log("installing npm dependencies (npm ci)")
  const result = spawnSync("npm", ["ci", "--no-audit", "--no-fund"], { stdio: "inherit" })
  if (result.status !== 0) process.exit(result.status ?? 1)
}

/** The newest modification time of the files under `dir` (0 when there are none). */
const newest = (dir) => {
  let latest = 0
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name === "dist" || entry.name === "node_modules") continue
    const path = join(dir, entry.name)
    latest = Math.max(latest, entry.isDirectory() ? newest(path) : statSync(path).mtimeMs)
  }
  return latest
}

const dashboardStale = () => {
  const built = "web/dist/index.html"
  // The dashboard also bundles the service's list of key scopes.
  const sources = Math.max(newest("web"), statSync("src/kernel/Scopes.ts").mtimeMs)
  return !existsSync(built) || sources > statSync(built).mtimeMs
}

if (existsSync("web") && dashboardStale()) {
  log("building the dashboard (web/ into web/dist)")
  const result = spawnSync(
    "node_modules/.bin/vite",
    ["build", "--config", "web/vite.config.ts", "--logLevel", "warn"],
    {
      stdio: "inherit"
    }
  )
  if (result.status !== 0) process.exit(result.status ?? 1)
}

const isExecutable = (path) => {
  try {
    accessSync(path, constants.X_OK)
    return true
  } catch {
    return false
  }
}

const canApt = () =>
  spawnSync("sh", ["-c", "command -v apt-get"], { stdio: "ignore" }).status === 0 && process.getuid?.() === 0

let aptUpdated = false
/** Installs Debian packages with apt-get; false when that is not possible here. */
const aptInstall = (packages) => {
  if (!canApt()) return false
  try {
    if (!aptUpdated) execFileSync("apt-get", ["update", "-qq"], { stdio: "inherit" })
    aptUpdated = true
    execFileSync("apt-get", ["install", "-y", "-qq", "--no-install-recommends", ...packages], {
      stdio: "inherit",
      env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" }
    })
    return true
  } catch {
    return false
  }
}

const chromePath = process.env.CHROME_PATH
if (chromePath !== undefined && chromePath !== "") {
  if (!isExecutable(chromePath)) {
    log(`CHROME_PATH=${chromePath} is not an executable file`)
    process.exit(1)
  }
} else if (!isExecutable("/usr/bin/chromium")) {
  log("Chromium not found: installing Debian's chromium package")
  if (!aptInstall(["chromium", "fonts-liberation"])) {
    log(
      "Chromium not found and apt-get cannot install it here: install it (Debian/Ubuntu: sudo apt-get install -y chromium) or set CHROME_PATH to a Chromium or Chrome executable"
    )
    process.exit(1)
  }
}

// Session recordings are encoded into WebM with ffmpeg when a session ends.
if (!isExecutable("/usr/bin/ffmpeg")) {
  log("ffmpeg not found: installing Debian's ffmpeg package (it encodes session recordings)")
  if (!aptInstall(["ffmpeg"])) {
    log("ffmpeg not found and apt-get cannot install it here: install it (sudo apt-get install -y ffmpeg)")
    process.exit(1)
  }
}

// `block_ads`: the egress proxy refuses the hosts of EasyList and EasyPrivacy, which Debian ships with
// uBlock Origin's package (read as data: the extension itself is not loaded). Without it, a create
// with `block_ads` says the lists are missing.
const AD_LISTS = "/usr/share/chromium/extensions/ublock-origin/assets/thirdparties/easylist/easylist.txt"
if ((process.env.BLOCK_ADS_LISTS ?? "") === "" && !existsSync(AD_LISTS)) {
  log("the ad and tracker lists were not found: installing Debian's webext-ublock-origin-chromium package")
  if (!aptInstall(["webext-ublock-origin-chromium"]))
    log(
      "apt-get cannot install webext-ublock-origin-chromium here: block_ads will be refused (set BLOCK_ADS_LISTS)"
    )
}

// Every browser runs in a cell (native/cell.c): gcc compiles it. As another user, with no gcc, the
// service runs no browsers and says why (`npx rbs doctor`).
if (process.getuid?.() !== 0) {
  if (isExecutable("/usr/bin/gcc")) {
    if (!buildNative(log, { sandboxes: false })) {
      log("compiling the browser cell (native/cell.c) failed")
      process.exit(1)
    }
  } else if (!existsSync("native/build/rbs-cell")) {
    log(
      "gcc not found: browsers need their cell compiled from native/cell.c (install gcc, then run this again)"
    )
  }
}

// The tests start their own Redis; so does `npm run cluster` with REDIS_PORT.
const wantsRedis = forTests || (process.env.REDIS_PORT ?? "") !== ""
if (wantsRedis && !isExecutable("/usr/bin/redis-server")) {
  log("redis-server not found: installing Debian's redis-server package")
  if (!aptInstall(["redis-server"])) {
    log(
      "redis-server not found and apt-get cannot install it here: install it (sudo apt-get install -y redis-server)"
    )
    process.exit(1)
  }
}

if (forTests && !isExecutable("/usr/bin/ssh-keygen")) {
  log("ssh-keygen not found: installing Debian's openssh-client package (the tests generate keys with it)")
  if (!aptInstall(["openssh-client"])) {
    log(
      "ssh-keygen not found and apt-get cannot install it here: install it (sudo apt-get install -y openssh-client)"
    )
    process.exit(1)
  }
}

// The container tests (test/container) build the image and run compose.yaml with Podman, as root.
if (forTests && process.getuid?.() === 0 && !isExecutable("/usr/bin/podman-compose")) {
  log("podman not found: installing Debian's podman, buildah and podman-compose (the container tests)")
  if (
    !aptInstall(["podman", "buildah", "podman-compose", "golang-github-containernetworking-plugin-dnsname"])
  )
    log("cannot install podman here: the container tests will be skipped, saying why")
}

// The image tests (test/features/images) pull from registries they run on loopback: Debian's
// docker-registry, with Apache's htpasswd for the one behind basic auth.
if (
  forTests &&
  process.getuid?.() === 0 &&
  (!isExecutable("/usr/bin/docker-registry") || !isExecutable("/usr/bin/htpasswd"))
) {
  log("docker-registry not found: installing Debian's docker-registry and apache2-utils (the image tests)")
  if (!aptInstall(["docker-registry", "apache2-utils"])) {
    log(
      "docker-registry not found and apt-get cannot install it here: install it (sudo apt-get install -y docker-registry apache2-utils)"
    )
    process.exit(1)
  }
  // The package enables a system-wide registry on :5000; the tests start their own on loopback.
  spawnSync("systemctl", ["disable", "--now", "docker-registry"], { stdio: "ignore" })
}

// Sandbox sessions need root (each sandbox gets a user namespace and a uid range of its own): as
// another user the service runs without them and says so at start.
if (process.getuid?.() === 0) {
  const tools = {
    runc: "/usr/bin/runc",
    umoci: "/usr/bin/umoci",
    mmdebstrap: "/usr/bin/mmdebstrap",
    skopeo: "/usr/bin/skopeo",
    gcc: "/usr/bin/gcc",
    // mkfs.ext4 makes each sandbox's disk (SANDBOX_DISK_MB).
    e2fsprogs: "/usr/sbin/mkfs.ext4"
  }
  const missing = Object.entries(tools).filter(([, path]) => !isExecutable(path))
  const staticLibc =
    existsSync("/usr/lib/x86_64-linux-gnu/libc.a") || existsSync("/usr/lib/aarch64-linux-gnu/libc.a")
  const packages = [...missing.map(([name]) => name), ...(staticLibc ? [] : ["libc6-dev"])]
  if (packages.length > 0) {
    log(`installing Debian's ${packages.join(", ")} (browser cells and sandbox sessions)`)
    if (!aptInstall(packages)) {
      log(`cannot install ${packages.join(", ")}: the service will run without sandbox sessions`)
    }
  }
  if (!isExecutable(tools.gcc) || !buildNative(log)) {
    log("compiling the native helpers (native/) failed: browsers need their cell")
    process.exit(1)
  }
  if (isExecutable(tools.mmdebstrap) && isExecutable(tools.umoci)) {
    if (!buildDefaultImage(imagesDirFromEnv(), log)) {
      log(
        "building the default sandbox image failed (mmdebstrap needs deb.debian.org): sandbox sessions need it"
      )
      process.exit(1)
    }
  }
}
