// A bare Node process that spawns `true` each time it reads a line and
// answers how long it took (ms): the host spawn of a small process, beside
// the bench's own (whose process, holding the in-process service, is larger,
// and forking it copies more page tables). See bench/README.md.
import { createInterface } from "node:readline"
import { spawnTrue } from "./SpawnTrue.ts"

for await (const _ of createInterface({ input: process.stdin })) {
  process.stdout.write(`${await spawnTrue()}\n`)
}
