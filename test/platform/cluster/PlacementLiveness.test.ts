import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { isReady, request, signUp, waitForSession } from "../../support/Client.ts"
import { nodesTable, ownerOf, placementSettled, startNode, timings } from "../../support/Nodes.ts"
import { stop } from "../../support/ServiceProcess.ts"
import * as TestService from "../../support/TestService.ts"

describe("several nodes: placement after a death", () => {
  it.live(
    "creates made right after a node is killed, while its last heartbeat is still recent, go to a live node: none lands on the dead one and ends node_lost",
    () =>
      Effect.gen(function* () {
        const databaseUrl = yield* TestService.freshDatabase
        const a = yield* startNode(databaseUrl, { MAX_BROWSERS: "3" })
        // The node with the most free places: placement's first choice while its beat looks alive.
        const b = yield* startNode(databaseUrl, { MAX_BROWSERS: "8" })
        yield* placementSettled(databaseUrl, [a, b])
        const account = yield* signUp(a.baseUrl)

        yield* stop(b.child, "SIGKILL")
        // B's last beat is still recent: a placement that reads beats alone takes it for alive.
        const beats = yield* nodesTable(databaseUrl)
        const bBeat = beats.find((node: any) => node.id === b.nodeId)!
        assert.isBelow(Number(bBeat.silent_ms), timings.placeableWithinMs - 1_000, "B still looks alive")
        const answers = yield* Effect.all(
          Array.from({ length: 3 }, () =>
            request(a.baseUrl, "POST", "/v1/sessions", { key: account.key, body: {} })
          ),
          { concurrency: "unbounded" }
        )
        const ids: Array<string> = []
        for (const created of answers) {
          if (created.status === 503) {
            assert.strictEqual(created.json.error.code, "capacity_exhausted")
            assert.isNotNull(created.headers.get("retry-after"))
            continue
          }
          assert.strictEqual(created.status, 201, created.text)
          ids.push(created.json.id)
        }
        assert.isNotEmpty(ids, "the live node had room")
        for (const id of ids) {
          assert.strictEqual(
            (yield* ownerOf(databaseUrl, id)).node_id,
            a.nodeId,
            `${id} placed on the live node`
          )
          const ready = yield* waitForSession(a.baseUrl, account.key, id, isReady, 60_000)
          assert.strictEqual(ready.status, "ready")
        }
      }).pipe(Effect.scoped),
    180_000
  )
})
