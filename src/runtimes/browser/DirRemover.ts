import { Effect, type Scope } from "effect"
import * as Fs from "node:fs/promises"
import { Worker } from "node:worker_threads"

/**
 * Removes whole directory trees (a browser's profile and temp dir: about 200
 * entries each) on a thread of their own. `fs.promises.rm` walks a tree in
 * JavaScript, one promise and one thread-pool trip per entry: about 11 ms of
 * the service's CPU per profile here, on the event loop. `fs.rmSync` does the
 * same walk natively in under 3 ms, but would stall every session's relay
 * meanwhile, so it runs on this worker. Without the worker (it failed to
 * start, or died) the promise walk runs instead.
 */
export interface DirRemover {
  readonly remove: (path: string) => Effect.Effect<void>
}

// CommonJS, evaluated: the same from src/ (type stripping) and from a build in dist/.
const WORKER_SOURCE = `
const { parentPort } = require("node:worker_threads")
const { rmSync } = require("node:fs")
parentPort.on("message", ({ id, path }) => {
  let error = null
  try {
    rmSync(path, { recursive: true, force: true, maxRetries: 3 })
  } catch (cause) {
    error = String(cause)
  }
  parentPort.postMessage({ id, error })
})
`

const removeOnLoop = (path: string) => Fs.rm(path, { recursive: true, force: true, maxRetries: 3 })

/** A remover whose worker lives as long as the scope. */
export const make: Effect.Effect<DirRemover, never, Scope.Scope> = Effect.gen(function* () {
  const pending = new Map<number, { readonly path: string; readonly done: (error: string | null) => void }>()
  let nextId = 0
  let worker: Worker | undefined = yield* Effect.acquireRelease(
    Effect.sync(() => {
      try {
        const started = new Worker(WORKER_SOURCE, { eval: true, name: "rbs-dir-remover" })
        // Removals in flight keep it busy, never the process alive.
        started.unref()
        return started
      } catch {
        return undefined
      }
    }),
    (started) => Effect.promise(async () => void (await started?.terminate()))
  )
  // A worker gone for any reason: what it had not done is done on the loop, and so is the rest.
  const lost = () => {
    worker = undefined
    for (const { path, done } of pending.values())
      void removeOnLoop(path).then(
        () => done(null),
        (cause) => done(String(cause))
      )
    pending.clear()
  }
  worker?.on("message", ({ id, error }: { readonly id: number; readonly error: string | null }) => {
    const request = pending.get(id)
    pending.delete(id)
    request?.done(error)
  })
  worker?.on("error", lost)
  worker?.on("exit", lost)

  const remove = (path: string) =>
    Effect.callback<void>((resume) => {
      const current = worker
      if (current === undefined) {
        void removeOnLoop(path).then(
          () => resume(Effect.void),
          (cause) => resume(Effect.logWarning("browser.dir_remove_failed", { path, cause: String(cause) }))
        )
        return
      }
      const id = nextId++
      pending.set(id, {
        path,
        done: (error) =>
          resume(
            error === null
              ? Effect.void
              : Effect.logWarning("browser.dir_remove_failed", { path, cause: error })
          )
      })
      current.postMessage({ id, path })
    })
  return { remove }
})
