import { Effect } from "effect"
import * as V8 from "node:v8"
import * as Vm from "node:vm"

V8.setFlagsFromString("--expose-gc")
/** A full garbage collection, for a measure of what is held. */
const collect = Vm.runInNewContext("gc") as () => void

/**
 * The buffers this process holds after a full collection: what a service in
 * it keeps, not the garbage of its requests. The least of five readings 50 ms
 * apart: a buffer the last request's sockets release a moment later (more of
 * them on a busy machine) is in one reading, what the service keeps is in all.
 */
export const heldBuffers = Effect.gen(function* () {
  let least = Number.POSITIVE_INFINITY
  for (let i = 0; i < 5; i++) {
    if (i > 0) yield* Effect.sleep("50 millis")
    collect()
    least = Math.min(least, process.memoryUsage().arrayBuffers)
  }
  return least
})
