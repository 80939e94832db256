// The set-up's sandbox part (plain Node, no dependencies): the supervisor and
// the idmapped-mount helper compiled from native/ (gcc, statically for the
// supervisor, which runs inside every image), and the default image built
// from Debian's packages: mmdebstrap into a root filesystem, packaged as an
// OCI image with umoci into the node's image store, unpacked once. The build
// is cached: it runs again only when its package list or suite changes.
import { execFileSync, spawnSync } from "node:child_process"
import { createHash } from "node:crypto"
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"

export const IMAGE_NAME = "debian"
/** The example assistant runtime the default image carries as `rbs-assistant-example`. */
const EXAMPLE_RUNTIME = resolve(import.meta.dirname, "..", "native", "rbs-assistant-example.py")
export const SUITE = "bookworm"
export const MIRROR = "http://deb.debian.org/debian"
/** What a sandbox is expected to have: a shell, Python, Node, git, curl and the usual tools. */
export const PACKAGES = [
  "bash",
  "ca-certificates",
  "curl",
  "git",
  "less",
  "nodejs",
  "npm",
  "procps",
  "python3",
  "python3-pip",
  "python3-venv",
  "unzip",
  "xz-utils"
]

const newer = (source, target) => !existsSync(target) || statSync(source).mtimeMs > statSync(target).mtimeMs

/** Whether a static C library is there to link against (Debian's libc6-dev). */
const hasStaticLibc = () =>
  existsSync("/usr/lib/x86_64-linux-gnu/libc.a") || existsSync("/usr/lib/aarch64-linux-gnu/libc.a")

/**
 * Compiles native/*.c into native/build when a source is newer than its
 * binary. `sandboxes`: the sandbox helpers too (root only; the supervisor
 * runs inside images, so it must be static). The browser's cell and the
 * launcher are static when a static libc is there (a launch execs the cell,
 * and a static binary skips the dynamic loader's work each time).
 */
export const buildNative = (log, { sandboxes = true } = {}) => {
  const out = "native/build"
  mkdirSync(out, { recursive: true })
  const linked = hasStaticLibc() ? ["-static"] : []
  const targets = [
    ...(sandboxes
      ? [
          { source: "native/supervisor.c", binary: join(out, "rbs-supervisor"), flags: ["-static"] },
          { source: "native/idmap-mount.c", binary: join(out, "rbs-idmap-mount"), flags: [] }
        ]
      : []),
    // The cell every browser runs in: its own network, mount and PID namespaces.
    { source: "native/cell.c", binary: join(out, "rbs-cell"), flags: linked },
    // The resident launcher the service asks to start its browsers (it never forks its own large process).
    { source: "native/spawner.c", binary: join(out, "rbs-spawner"), flags: linked }
  ]
  for (const { source, binary, flags } of targets) {
    if (!newer(source, binary)) continue
    log(`compiling ${source}`)
    const result = spawnSync("gcc", ["-O2", "-Wall", "-Wextra", ...flags, "-o", `${binary}.tmp`, source], {
      stdio: "inherit"
    })
    if (result.status !== 0) return false
    renameSync(`${binary}.tmp`, binary)
  }
  return true
}

const umoci = (args) => execFileSync("umoci", args, { stdio: ["ignore", "ignore", "inherit"] })

const buildKey = () =>
  createHash("sha256")
    .update(JSON.stringify({ SUITE, PACKAGES, v: 2, example: readFileSync(EXAMPLE_RUNTIME, "utf8") }))
    .digest("hex")

const manifestDigest = (layout, name) => {
  try {
    const index = JSON.parse(readFileSync(join(layout, "index.json"), "utf8"))
    return index.manifests.find((m) => m.annotations?.["org.opencontainers.image.ref.name"] === name)?.digest
  } catch {
    return undefined
  }
}

/**
 * Builds the default image into `imagesDir` unless its cached build is current; unpacks it once.
 * `rootfs`: a tarball of a root file system with `PACKAGES` already made (the container image's
 * build makes one in a stage of its own), instead of mmdebstrap's. `unpack: false` leaves the
 * unpacking to the service, at the first sandbox of the image.
 */
export const buildDefaultImage = (imagesDir, log, { rootfs, unpack = true } = {}) => {
  const layout = join(imagesDir, "oci")
  const marker = join(imagesDir, `${IMAGE_NAME}.build`)
  const key = buildKey()
  const current =
    existsSync(marker) && readFileSync(marker, "utf8").trim() === key && manifestDigest(layout, IMAGE_NAME)
  if (!current) {
    log(`building the sandbox image "${IMAGE_NAME}" from Debian's packages (${SUITE}, once)`)
    mkdirSync(imagesDir, { recursive: true })
    const work = join(tmpdir(), `rbs-image-${process.pid}`)
    rmSync(work, { recursive: true, force: true })
    mkdirSync(work, { recursive: true })
    try {
      const tarball = rootfs ?? join(work, "rootfs.tar")
      if (rootfs === undefined) {
        const built = spawnSync(
          "mmdebstrap",
          ["--quiet", "--variant=minbase", `--include=${PACKAGES.join(",")}`, SUITE, tarball, MIRROR],
          { stdio: "inherit" }
        )
        if (built.status !== 0) return false
      }
      if (!existsSync(join(layout, "index.json"))) umoci(["init", "--layout", layout])
      umoci(["new", "--image", `${layout}:${IMAGE_NAME}`])
      umoci(["raw", "add-layer", "--image", `${layout}:${IMAGE_NAME}`, tarball])
      // The example assistant runtime (docs/guides/assistants.md), on every sandbox's PATH.
      umoci([
        "insert",
        "--image",
        `${layout}:${IMAGE_NAME}`,
        EXAMPLE_RUNTIME,
        "/usr/local/bin/rbs-assistant-example"
      ])
      umoci([
        "config",
        "--image",
        `${layout}:${IMAGE_NAME}`,
        "--config.env=PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "--config.env=LANG=C.UTF-8",
        "--config.workingdir=/root",
        "--config.cmd=/bin/bash",
        `--author=remote-browser-service`
      ])
      umoci(["gc", "--layout", layout])
      writeFileSync(marker, `${key}\n`)
    } finally {
      rmSync(work, { recursive: true, force: true })
    }
  }
  if (!unpack) return true
  // Unpacked once, here rather than at a sandbox's first start.
  const digest = manifestDigest(layout, IMAGE_NAME)
  const unpacked = join(imagesDir, "unpacked", digest.replace(":", "-"))
  if (!existsSync(join(unpacked, "rootfs"))) {
    log(`unpacking the sandbox image "${IMAGE_NAME}"`)
    mkdirSync(join(imagesDir, "unpacked"), { recursive: true })
    const temporary = `${unpacked}.tmp-setup`
    rmSync(temporary, { recursive: true, force: true })
    umoci(["unpack", "--image", `${layout}:${IMAGE_NAME}`, temporary])
    renameSync(temporary, unpacked)
  }
  return true
}

/** `SANDBOX_IMAGES_DIR`, else `DATA_DIR/images`, else `.data/images`, as the service reads them. */
export const imagesDirFromEnv = () =>
  resolve(process.env.SANDBOX_IMAGES_DIR || join(process.env.DATA_DIR || ".data", "images"))
