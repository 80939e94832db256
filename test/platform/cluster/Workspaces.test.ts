import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as S3Server from "../../support/S3Server.ts"
import { isReady, request, signUp, waitForSession } from "../../support/Client.ts"
import { nodesTable, ownerOf, placementSettled, startNode, timings } from "../../support/Nodes.ts"
import { stop } from "../../support/ServiceProcess.ts"
import * as Sandboxes from "../../support/Sandboxes.ts"
import * as TestService from "../../support/TestService.ts"

describe("several nodes: workspaces and jobs", () => {
  it.live(
    "a workspace's sessions run where its disk is; when that node dies its next session starts elsewhere from the newest snapshot (S3), and a running job is taken over after its lease",
    () =>
      Effect.gen(function* () {
        const databaseUrl = yield* TestService.freshDatabase
        const s3 = yield* S3Server.serve
        const env = {
          BLOB_STORE: "s3://rbs-blobs/cluster/",
          S3_ENDPOINT: s3,
          S3_REGION: "us-east-1",
          S3_ACCESS_KEY_ID: "S3RVER",
          S3_SECRET_ACCESS_KEY: "S3RVER",
          BROWSER_POOL_SIZE: "0",
          // A dead node's job is taken over once its lease runs out: short here, 60 s by default.
          JOB_LEASE_SECONDS: "4"
        }
        const nodes = [
          yield* startNode(databaseUrl, env),
          yield* startNode(databaseUrl, env),
          yield* startNode(databaseUrl, env)
        ]
        yield* placementSettled(databaseUrl, nodes)
        const byId = new Map(nodes.map((node) => [node.nodeId, node]))
        const api = nodes[0]!.baseUrl
        const { key } = yield* signUp(api)

        const created = yield* request(api, "POST", "/v1/workspaces", {
          key,
          body: { name: "w", image: "debian" }
        })
        assert.strictEqual(created.status, 200, created.text)
        /** A session on the workspace running `command`; where it ran and what it printed. */
        const inSession = (command: string) =>
          Effect.gen(function* () {
            const made = yield* request(api, "POST", "/v1/sessions", { key, body: { workspace: "w" } })
            assert.strictEqual(made.status, 201, made.text)
            const session = yield* waitForSession(api, key, made.json.id, isReady, 60_000)
            const exec = yield* request(api, "POST", `/v1/sessions/${session.id}/exec`, {
              key,
              body: { command }
            })
            assert.strictEqual(exec.status, 200, exec.text)
            yield* request(api, "DELETE", `/v1/sessions/${session.id}`, { key })
            yield* waitForSession(api, key, session.id, (s) => s.status === "closed")
            return {
              node: (yield* ownerOf(databaseUrl, session.id)).node_id,
              stdout: exec.json.stdout as string
            }
          })

        const first = yield* inSession("echo v1 > ~/state && cat ~/state")
        assert.strictEqual(first.stdout, "v1\n")
        for (let i = 0; i < 3; i++) {
          const again = yield* inSession("cat ~/state")
          assert.strictEqual(again.node, first.node, "placed where the disk is")
          assert.strictEqual(again.stdout, "v1\n")
        }
        const workspace = yield* request(api, "GET", "/v1/workspaces/w", { key })
        assert.strictEqual(workspace.json.node_endpoint, byId.get(first.node)!.baseUrl)

        // The snapshot is written on the disk's node into the bucket; what comes after it is not in it.
        const snap = yield* request(api, "POST", "/v1/workspaces/w/snapshots", { key, body: { name: "s1" } })
        assert.strictEqual(snap.status, 200, snap.text)
        yield* inSession("echo v2 > ~/state")

        // A job running when its node dies.
        const job = yield* request(api, "POST", "/v1/jobs", {
          key,
          body: { kind: "exec", input: { command: "sleep 6; echo finished" } }
        })
        assert.strictEqual(job.status, 201, job.text)
        let running: any
        for (let i = 0; i < 300; i++) {
          running = (yield* request(api, "GET", `/v1/jobs/${job.json.id}`, { key })).json
          if (running.state === "running" && running.attempt_log.length === 1 && running.session_id !== null)
            break
          yield* Effect.sleep("100 millis")
        }
        const jobNode = running.attempt_log[0].node_id as string

        // The disk's node and the job's node die without warning.
        const killed = new Set([first.node, jobNode])
        for (const id of killed) {
          yield* stop(byId.get(id)!.child, "SIGKILL")
          // What a killed node leaves running (its sandboxes, their mounts), removed after the test.
          yield* Effect.addFinalizer(() => Sandboxes.reap(byId.get(id)!.env.DATA_DIR).pipe(Effect.ignore))
        }
        const alive = nodes.filter((node) => !killed.has(node.nodeId))
        const via = alive[0]!.baseUrl
        // Sessions of the dead node end node_lost; the workspace's next session starts on a live one.
        // Until placement sees them gone (their heartbeat older than 3 beats).
        for (let i = 0; i < 300; i++) {
          const rows = (yield* nodesTable(databaseUrl)) as ReadonlyArray<{ id: string; silent_ms: string }>
          const gone = rows.filter((row) => killed.has(row.id))
          if (gone.every((row) => Number(row.silent_ms) > timings.placeableWithinMs)) break
          yield* Effect.sleep("100 millis")
        }
        const made = yield* request(via, "POST", "/v1/sessions", { key, body: { workspace: "w" } })
        assert.strictEqual(made.status, 201, made.text)
        const session = yield* waitForSession(via, key, made.json.id, isReady, 60_000)
        const exec = yield* request(via, "POST", `/v1/sessions/${session.id}/exec`, {
          key,
          body: { command: "cat ~/state" }
        })
        assert.strictEqual(exec.json.stdout, "v1\n", "the newest snapshot's content: v2 died with its node")
        const landed = byId.get((yield* ownerOf(databaseUrl, session.id)).node_id)!
        assert.isFalse(killed.has(landed.nodeId))
        yield* request(via, "DELETE", `/v1/sessions/${session.id}`, { key })
        const moved = yield* request(via, "GET", "/v1/workspaces/w", { key })
        assert.strictEqual(moved.json.node_endpoint, landed.baseUrl, "the workspace lives there now")

        // A restore of the snapshot on a node that did not write it.
        yield* waitForSession(via, key, session.id, (s) => s.status === "closed")
        const restored = yield* request(via, "POST", "/v1/workspaces/w/snapshots/s1/restore", { key })
        assert.strictEqual(restored.status, 200, restored.text)

        // The job: its attempt on the dead node abandoned when the lease ran out, the next one done elsewhere.
        let finished: any
        for (let i = 0; i < 1200; i++) {
          finished = (yield* request(via, "GET", `/v1/jobs/${job.json.id}`, { key })).json
          if (finished.state === "succeeded" || finished.state === "failed") break
          yield* Effect.sleep("100 millis")
        }
        assert.strictEqual(finished.state, "succeeded", JSON.stringify(finished))
        assert.strictEqual(finished.result.stdout, "finished\n")
        assert.deepStrictEqual(
          finished.attempt_log.map((a: any) => a.outcome),
          ["abandoned", "succeeded"]
        )
        assert.strictEqual(finished.attempt_log[0].node_id, jobNode)
        assert.isFalse(killed.has(finished.attempt_log[1].node_id), "taken over by a live node")
        for (const node of alive) yield* stop(node.child, "SIGTERM")
      }).pipe(Effect.scoped),
    300_000
  )
})
