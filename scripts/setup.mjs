// Runs before `npm start` and `npm test` on whatever Node the machine has:
// installs npm dependencies when they are missing or stale, and Chromium from
// Debian's package when no browser is found. Plain Node, no dependencies.
import { execFileSync, spawnSync } from "node:child_process"
import { accessSync, constants, existsSync, statSync } from "node:fs"

const log = (message) => process.stderr.write(`[setup] ${message}\n`)

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

const isExecutable = (path) => {
  try {
    accessSync(path, constants.X_OK)
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
  const hasApt = spawnSync("sh", ["-c", "command -v apt-get"], { stdio: "ignore" }).status === 0
  const isRoot = process.getuid?.() === 0
  if (!hasApt || !isRoot) {
    log(
      "Chromium not found: install it (Debian/Ubuntu: sudo apt-get install -y chromium) or set CHROME_PATH to a Chromium or Chrome executable"
    )
    process.exit(1)
  }
  log("Chromium not found: installing Debian's chromium package")
  try {
    execFileSync("apt-get", ["update", "-qq"], { stdio: "inherit" })
    execFileSync(
      "apt-get",
      ["install", "-y", "-qq", "--no-install-recommends", "chromium", "fonts-liberation"],
      {
        stdio: "inherit",
        env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" }
      }
    )
  } catch {
    log("apt-get could not install chromium; install it by hand or set CHROME_PATH")
    process.exit(1)
  }
}
