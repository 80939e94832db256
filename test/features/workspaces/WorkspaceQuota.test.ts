import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as FsSync from "node:fs"
import * as Path from "node:path"
import { isReady, request, signUp, waitForSession } from "../../support/Client.ts"
import { until } from "../../support/Poll.ts"
import * as TestService from "../../support/TestService.ts"

// Each workspace a file system of its own (WORKSPACE_DISK_MB, here 64): a session that fills its home
// meets ENOSPC, and nothing else fills with it.

layer(
  TestService.layer({
    browserPoolSize: 0,
    workspaceDiskMb: 64,
    workspaceMeasureSeconds: 1,
    sandbox: { poolSize: 0 }
  }),
  { excludeTestServices: true }
)("a workspace's own disk", (it) => {
  it.effect(
    "a session writing past WORKSPACE_DISK_MB gets ENOSPC; its used_bytes shows the cap; another workspace and the service go on",
    () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const { key } = yield* signUp(service.baseUrl)
        const api = (method: string, path: string, body?: unknown) =>
          request(service.baseUrl, method, path, { key, ...(body === undefined ? {} : { body }) })
        const open = (workspace: string, extra: object = {}) =>
          Effect.gen(function* () {
            const created = yield* api("POST", "/v1/sessions", { workspace, ...extra })
            assert.strictEqual(created.status, 201, created.text)
            return (yield* waitForSession(service.baseUrl, key, created.json.id, isReady)).id as string
          })
        const run = (id: string, command: string) =>
          Effect.map(api("POST", `/v1/sessions/${id}/exec`, { command }), (r) => r.json)
        const images = Path.join(service.config.dataDir, "workspace-disks")

        for (const name of ["full", "other"]) {
          const made = yield* api("POST", "/v1/workspaces", { name, image: "debian" })
          assert.strictEqual(made.status, 200, made.text)
        }
        const full = yield* open("full")
        const fill = yield* run(full, "dd if=/dev/zero of=/root/big bs=1M count=100 2>&1; echo status=$?")
        assert.include(fill.stdout, "No space left on device")
        assert.notInclude(fill.stdout, "status=0")
        const measured = yield* until(
          Effect.map(api("GET", "/v1/workspaces/full"), (r) => r.json.used_bytes as number),
          (bytes) => bytes >= 48 * 1024 * 1024,
          10_000
        )
        assert.isAtMost(measured, 64 * 1024 * 1024, "the cap, measured while the session runs")
        const image = Path.join(images, `${(yield* api("GET", "/v1/workspaces/full")).json.id}.img`)
        assert.isAtMost(
          FsSync.statSync(image).blocks * 512,
          80 * 1024 * 1024,
          "the data dir holds what it holds"
        )

        const other = yield* open("other")
        const wrote = yield* run(
          other,
          "dd if=/dev/zero of=/root/file bs=1M count=32 2>&1 >/dev/null; echo status=$?"
        )
        assert.include(wrote.stdout, "status=0", "another workspace writes as before")
        const again = yield* run(full, "rm /root/big && echo fine > /root/after && cat /root/after")
        assert.strictEqual(again.stdout, "fine\n", "the full one works again once it deletes")
        assert.strictEqual((yield* api("GET", "/readyz")).status, 200)
        for (const id of [full, other]) {
          yield* api("DELETE", `/v1/sessions/${id}`)
          yield* waitForSession(service.baseUrl, key, id, (s) => s.status === "closed")
        }

        // A session without persistence works on a copy with a disk of its own, gone at its end.
        const scratch = yield* open("full", { persistence: false })
        const copy = yield* run(scratch, "cat /root/after; df -k --output=size /root | tail -1")
        assert.match(copy.stdout, /^fine\n\s*\d+\n$/)
        assert.isTrue(FsSync.readdirSync(images).some((name) => name.includes("-scratch-")))
        yield* api("DELETE", `/v1/sessions/${scratch}`)
        yield* until(
          Effect.sync(() => FsSync.readdirSync(images).filter((name) => name.includes("-scratch-"))),
          (left) => left.length === 0,
          10_000
        )

        // A snapshot restored round trips through a new image; deleting the workspace removes its image.
        const snap = yield* api("POST", "/v1/workspaces/full/snapshots", { name: "one" })
        assert.strictEqual(snap.status, 200, JSON.stringify(snap.json))
        const changing = yield* open("full")
        yield* run(changing, "echo changed > /root/after")
        yield* api("DELETE", `/v1/sessions/${changing}`)
        yield* waitForSession(service.baseUrl, key, changing, (s) => s.status === "closed")
        const restored = yield* api("POST", "/v1/workspaces/full/snapshots/one/restore")
        assert.strictEqual(restored.status, 200, JSON.stringify(restored.json))
        const back = yield* open("full")
        assert.strictEqual((yield* run(back, "cat /root/after")).stdout, "fine\n", "the snapshot's content")
        yield* api("DELETE", `/v1/sessions/${back}`)
        yield* waitForSession(service.baseUrl, key, back, (s) => s.status === "closed")
        assert.deepStrictEqual(
          FsSync.readdirSync(images).filter((name) => !name.endsWith(".img")),
          [],
          "no half-made image or mount point left"
        )
        yield* api("DELETE", "/v1/workspaces/full")
        assert.isFalse(FsSync.existsSync(image), "its disk goes with it")
      })
  )
})
