import { Effect } from "effect"
import { spawn } from "node:child_process"
import * as Net from "node:net"
import { freePort } from "./TestService.ts"

/** A real redis-server on a loopback port, without persistence, stopped with the scope. */
export const serve = Effect.acquireRelease(
  Effect.gen(function* () {
    const port = yield* freePort
    const child = spawn(
      "redis-server",
      ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
      { stdio: "ignore" }
    )
    // Ready when it accepts connections.
    for (let i = 0; i < 200; i++) {
      const up = yield* Effect.promise(
        () =>
          new Promise<boolean>((resolve) => {
            const socket = Net.connect(port, "127.0.0.1", () => {
              socket.end()
              resolve(true)
            })
            socket.once("error", () => resolve(false))
          })
      )
      if (up) return { child, url: `redis://127.0.0.1:${port}` }
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 25)))
    }
    child.kill("SIGKILL")
    return yield* Effect.die(new Error("redis-server did not start"))
  }),
  ({ child }) =>
    Effect.promise(
      () =>
        new Promise<void>((resolve) => {
          if (child.exitCode !== null) return resolve()
          child.once("exit", () => resolve())
          child.kill("SIGTERM")
        })
    )
).pipe(Effect.map(({ url }) => url))
