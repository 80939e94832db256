import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Crypto from "node:crypto"
import * as FsSync from "node:fs"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import { isReady, request, signUp, waitForSession } from "../../support/Client.ts"
import { IMAGES_DIR } from "../../support/Images.ts"
import { ownerOf, placementSettled, startNode } from "../../support/Nodes.ts"
import { until } from "../../support/Poll.ts"
import * as Registry from "../../support/Registry.ts"
import { stop } from "../../support/ServiceProcess.ts"
import * as TestService from "../../support/TestService.ts"

// An account's image pulled through one node runs on another (fetched from the shared blob store
// and unpacked there once); deleted, the other node's copy goes at its next prune.

describe("account images across nodes", () => {
  it.live(
    "pulled through a node that runs no sandboxes, run on the one that does; its copy there pruned once deleted",
    () =>
      Effect.gen(function* () {
        const registry = yield* Registry.start()
        const dir = yield* Effect.acquireRelease(
          Effect.promise(() => Fs.mkdtemp(Path.join(TestService.TEST_ROOT, "runs", "images-cluster-"))),
          (dir) => Effect.promise(() => Fs.rm(dir, { recursive: true, force: true }))
        )
        const marker = `cluster-${Crypto.randomBytes(4).toString("hex")}`
        // An image of one file (no shell, nothing else): light to move between nodes, and the
        // sandbox's supervisor (bind-mounted, static) reads it through the files API.
        const layout = Path.join(dir, "layout")
        yield* Registry.tool("umoci", ["init", "--layout", layout])
        yield* Registry.tool("umoci", ["new", "--image", `${layout}:marked`])
        yield* Effect.promise(() => Fs.writeFile(Path.join(dir, "marker"), `${marker}\n`, { mode: 0o644 }))
        yield* Registry.tool("umoci", [
          "insert",
          "--image",
          `${layout}:marked`,
          Path.join(dir, "marker"),
          "/etc/rbs-marker"
        ])
        yield* Registry.push(registry, `oci:${layout}:marked`, "acme/marked:v1")

        const databaseUrl = yield* TestService.freshDatabase
        const blobs = Path.join(dir, "blobs")
        const env = {
          BROWSER_POOL_SIZE: "0",
          BLOB_STORE: blobs,
          REGISTRY_ALLOW_CIDRS: "127.0.0.1/32",
          SANDBOX_IMAGES_DIR: IMAGES_DIR,
          SANDBOX_POOL_SIZE: "0"
        }
        const a = yield* startNode(databaseUrl, { ...env, MAX_SANDBOXES: "0" })
        const bDataDir = yield* TestService.freshDataDir
        const b = yield* startNode(databaseUrl, { ...env, MAX_SANDBOXES: "2", DATA_DIR: bDataDir })
        yield* placementSettled(databaseUrl, [a, b])
        const account = yield* signUp(a.baseUrl)
        const key = account.key

        const created = yield* request(a.baseUrl, "POST", "/v1/images", {
          key,
          body: { reference: `docker://${registry.address}/acme/marked:v1`, name: "marked" }
        })
        assert.strictEqual(created.status, 202, created.text)
        const id = created.json.id as string
        const image = yield* until(
          Effect.map(request(b.baseUrl, "GET", `/v1/images/${id}`, { key }), (response) => response.json),
          (image) => image?.status !== "pulling",
          120_000
        )
        assert.strictEqual(image.status, "ready", JSON.stringify(image))

        const session = yield* request(a.baseUrl, "POST", "/v1/sessions", {
          key,
          body: { session_type: "sandbox", image: "marked" }
        })
        assert.strictEqual(session.status, 201, session.text)
        const sid = session.json.id as string
        // Its first run on b fetches the image from the blob store and unpacks it.
        yield* waitForSession(a.baseUrl, key, sid, isReady, 120_000)
        assert.strictEqual((yield* ownerOf(databaseUrl, sid)).node_id, b.nodeId, "only b runs sandboxes")
        const read = yield* request(a.baseUrl, "GET", `/v1/sessions/${sid}/download?path=/etc/rbs-marker`, {
          key
        })
        assert.strictEqual(read.text, `${marker}\n`, "the image's own file, in the sandbox on b")
        const copy = Path.join(bDataDir, "account-images", id)
        assert.isTrue(FsSync.existsSync(copy), "b fetched it from the blob store")
        yield* request(a.baseUrl, "DELETE", `/v1/sessions/${sid}`, { key })

        // Deleted through a: b's copy goes at b's next prune (the first at its start).
        assert.strictEqual((yield* request(a.baseUrl, "DELETE", `/v1/images/${id}`, { key })).status, 204)
        assert.isTrue(FsSync.existsSync(copy), "b has not pruned yet")
        yield* stop(b.child, "SIGTERM")
        yield* startNode(databaseUrl, { ...env, MAX_SANDBOXES: "2", DATA_DIR: bDataDir }).pipe(
          Effect.andThen(
            until(
              Effect.sync(() => FsSync.existsSync(copy)),
              (exists) => !exists,
              30_000
            )
          ),
          Effect.scoped,
          Effect.orDie
        )
      }).pipe(Effect.scoped),
    300_000
  )
})
