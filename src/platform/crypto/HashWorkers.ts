import { Context, Data, Effect, Layer } from "effect"
import { Worker } from "node:worker_threads"
import { ServiceConfig } from "../config/Config.ts"

// Password hashing on threads of its own. `crypto.scrypt` runs on libuv's
// four threads, which DNS lookups (every egress request's), file reads and
// zlib share: a flood of sign-ups or logins, each 128 MiB and half a second
// of a core at OWASP's cost, would stall them all. Here each hash runs in a
// worker thread's synchronous scrypt, `PASSWORD_HASH_WORKERS` of them, with a
// bounded queue in front.

/** The parameters of one scrypt derivation. */
export interface ScryptInput {
  readonly password: string
  readonly salt: Buffer
  readonly n: number
  readonly r: number
  readonly p: number
  readonly keyLength: number
}

/** Every worker is busy and the queue is full: the caller is refused rather than kept waiting. */
export class HashersBusy extends Data.TaggedError("HashersBusy")<{}> {}

/** How many derivations may wait per worker (at OWASP's cost, about half a second each). */
export const QUEUED_PER_WORKER = 16

// The worker, as CommonJS evaluated in place: no file to resolve, built or not.
const WORKER_SOURCE = `
const { parentPort } = require("node:worker_threads")
const { scryptSync } = require("node:crypto")
parentPort.on("message", (job) => {
  try {
    const maxmem = 128 * job.n * job.r + 1024 * 1024
    const key = scryptSync(job.password, Buffer.from(job.salt), job.keyLength, { N: job.n, r: job.r, p: job.p, maxmem })
    parentPort.postMessage({ id: job.id, key })
  } catch (error) {
    parentPort.postMessage({ id: job.id, error: String(error && error.message ? error.message : error) })
  }
})
`

interface Outcome {
  readonly id: number
  readonly key?: Uint8Array
  readonly error?: string
}

interface Slot {
  worker: Worker | undefined
  /** Derivations posted to this worker and not yet answered. */
  pending: Map<number, (outcome: Outcome) => void>
}

export class HashWorkers extends Context.Service<
  HashWorkers,
  {
    /** Derives a scrypt key on a worker thread; `HashersBusy` when the queue is full. */
    readonly scrypt: (input: ScryptInput) => Effect.Effect<Buffer, HashersBusy>
  }
>()("rbs/crypto/HashWorkers") {
  /** `workers` threads, started on first use and stopped with the scope. */
  static readonly make = (workers: number) =>
    Effect.gen(function* () {
      const slots: Array<Slot> = Array.from({ length: Math.max(1, workers) }, () => ({
        worker: undefined,
        pending: new Map()
      }))
      let nextId = 0
      let closed = false

      /** A worker for `slot`, started now if it has none (or its last one died). */
      const workerOf = (slot: Slot) => {
        if (slot.worker !== undefined) return slot.worker
        const worker = new Worker(WORKER_SOURCE, { eval: true })
        worker.unref()
        const settle = (outcome: Outcome) => {
          const done = slot.pending.get(outcome.id)
          slot.pending.delete(outcome.id)
          // Idle, a worker does not keep an embedding process alive.
          if (slot.pending.size === 0) worker.unref()
          done?.(outcome)
        }
        worker.on("message", settle)
        const fail = (reason: string) => {
          if (slot.worker === worker) slot.worker = undefined
          for (const id of [...slot.pending.keys()]) settle({ id, error: reason })
        }
        worker.on("error", (error) => fail(error.message))
        worker.on("exit", (code) => fail(`the hash worker exited (${code})`))
        slot.worker = worker
        return worker
      }

      yield* Effect.addFinalizer(() =>
        Effect.promise(async () => {
          closed = true
          await Promise.all(slots.map((slot) => slot.worker?.terminate()))
        })
      )

      const scrypt = (input: ScryptInput) =>
        Effect.suspend(() => {
          const slot = slots.reduce((least, each) => (each.pending.size < least.pending.size ? each : least))
          if (closed || slot.pending.size >= QUEUED_PER_WORKER) return Effect.fail(new HashersBusy())
          return Effect.callback<Buffer>((resume) => {
            const id = nextId++
            slot.pending.set(id, (outcome) =>
              resume(
                outcome.key !== undefined
                  ? Effect.succeed(
                      Buffer.from(outcome.key.buffer, outcome.key.byteOffset, outcome.key.length)
                    )
                  : Effect.die(new Error(outcome.error ?? "the hash worker answered nothing"))
              )
            )
            const worker = workerOf(slot)
            worker.ref()
            worker.postMessage({ ...input, id, salt: new Uint8Array(input.salt) })
            // A caller that stops waiting leaves the derivation to finish (it still holds its place in
            // the queue); only its answer is dropped.
            return Effect.sync(() => {
              if (slot.pending.has(id)) slot.pending.set(id, () => undefined)
            })
          })
        })

      return HashWorkers.of({ scrypt })
    })

  static readonly layer = Layer.effect(
    HashWorkers,
    Effect.flatMap(ServiceConfig, (config) => HashWorkers.make(config.passwordHashWorkers))
  )
}
