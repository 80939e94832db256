import { spawn } from "node:child_process"
import { createInterface } from "node:readline"

/**
 * `child_process.spawn("true")` on the host, piped as the service's exec is
 * (stdout and stderr read to their end): spawn called → `close`, in ms.
 */
export const spawnTrue = () =>
  new Promise<number>((resolve, reject) => {
    const t0 = performance.now()
    const child = spawn("true", [], { stdio: ["ignore", "pipe", "pipe"] })
    child.stdout.resume()
    child.stderr.resume()
    child.once("error", reject)
    child.once("close", (code) =>
      code === 0 ? resolve(performance.now() - t0) : reject(new Error(`true exited ${code}`))
    )
  })

/** A bare Node process (`Spawner.ts`) that spawns `true` on request: `next()` is one spawn's time there. */
export const startSpawner = () => {
  const child = spawn(
    process.execPath,
    ["--experimental-strip-types", new URL("./Spawner.ts", import.meta.url).pathname],
    { stdio: ["pipe", "pipe", "inherit"] }
  )
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
  const answers = createInterface({ input: child.stdout })[Symbol.asyncIterator]()
  return {
    next: async () => {
      child.stdin.write("go\n")
      const answer = await answers.next()
      if (answer.done === true) throw new Error("the spawner exited")
      return Number(answer.value)
    },
    stop: () => {
      child.stdin.end()
      return exited
    }
  }
}
