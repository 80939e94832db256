import { assert, layer } from "@effect/vitest"
import { Effect, Fiber, Schedule } from "effect"
import { SqlClient } from "effect/sql"
import * as Http from "node:http"
import type * as Net from "node:net"
import puppeteer from "puppeteer-core"
import { isReady, request, signUp, waitForSession } from "../../support/Client.ts"
import { until } from "../../support/Poll.ts"
import * as GitServer from "../../support/GitServer.ts"
import * as TestService from "../../support/TestService.ts"

/**
 * A site with a login on loopback: `POST /login` sets a session cookie (a
 * year long); `/` says who is logged in from it. Its page also keeps a note
 * in local storage.
 */
const loginSite = Effect.acquireRelease(
  Effect.promise(
    () =>
      new Promise<{ readonly url: string; readonly server: Http.Server }>((resolve) => {
        const server = Http.createServer((req, res) => {
          if (req.method === "POST" && req.url === "/login") {
            res.writeHead(303, {
              location: "/",
              "set-cookie": "who=alice; Max-Age=31536000; Path=/; HttpOnly"
            })
            return res.end()
          }
          const who = /(?:^|; )who=([a-z]+)/.exec(req.headers.cookie ?? "")?.[1]
          res.writeHead(200, { "content-type": "text/html" })
          res.end(
            `<!doctype html><title>site</title><p id="who">${who === undefined ? "anonymous" : `logged in as ${who}`}</p>` +
              `<form method="post" action="/login"><button id="login">log in</button></form>`
          )
        })
        server.listen(0, "127.0.0.1", () =>
          resolve({ url: `http://127.0.0.1:${(server.address() as Net.AddressInfo).port}`, server })
        )
      })
  ),
  ({ server }) => Effect.promise(() => new Promise<void>((resolve) => server.close(() => resolve())))
).pipe(Effect.map(({ url }) => url))

// Workspaces in use are measured every second (WORKSPACE_MEASURE_SECONDS), not every 30.
const workspacesService = TestService.layer({ browserPoolSize: 1, workspaceMeasureSeconds: 1 })

layer(workspacesService, { excludeTestServices: true })("workspaces", (it) => {
  const api = (method: string, path: string, options?: Parameters<typeof request>[3]) =>
    Effect.flatMap(TestService.TestService, (service) => request(service.baseUrl, method, path, options))

  /** A session on `workspace`, driven by puppeteer through `f`, then ended (DELETE). */
  const inSession = <A>(
    key: string,
    body: Record<string, unknown>,
    f: (page: import("puppeteer-core").Page) => Promise<A>
  ) =>
    Effect.gen(function* () {
      const service = yield* TestService.TestService
      const created = yield* api("POST", "/v1/sessions", { key, body })
      assert.strictEqual(created.status, 201, created.text)
      const session = yield* waitForSession(service.baseUrl, key, created.json.id, isReady)
      const answer = yield* Effect.promise(async () => {
        const browser = await puppeteer.connect({
          browserWSEndpoint: session.cdp_url,
          headers: { Authorization: `Bearer ${key}` }
        })
        try {
          const [page] = await browser.pages()
          return await f(page ?? (await browser.newPage()))
        } finally {
          await browser.disconnect()
        }
      })
      const ended = yield* api("DELETE", `/v1/sessions/${session.id}`, { key })
      assert.strictEqual(ended.status, 204)
      yield* waitForSession(service.baseUrl, key, session.id, (s) => s.status === "closed")
      return { answer, session }
    })

  /** What the site says and the page's note, on a fresh visit. */
  const look = (site: string) => async (page: import("puppeteer-core").Page) => {
    await page.goto(site)
    const who = await page.$eval("#who", (el) => el.textContent)
    const note = await page.evaluate(() => localStorage.getItem("note"))
    return { who, note }
  }

  it.effect("a rename that meets a concurrent one to the same name answers 409, never 500", () =>
    Effect.gen(function* () {
      const service = yield* TestService.TestService
      const { key } = yield* signUp(service.baseUrl)
      const alpha = yield* api("POST", "/v1/workspaces", { key, body: { name: "alpha" } })
      assert.strictEqual(alpha.status, 200, alpha.text)
      const beta = yield* api("POST", "/v1/workspaces", { key, body: { name: "beta" } })
      assert.strictEqual(beta.status, 200, beta.text)
      const sql = yield* SqlClient.SqlClient
      // Another rename of `alpha` to `gamma`, not yet committed: the route's check cannot see it, so
      // its own update of `beta` waits on the unique index until this one commits, and is refused.
      const renamed = yield* sql.withTransaction(
        Effect.gen(function* () {
          yield* sql`UPDATE workspaces SET name = 'gamma' WHERE id = ${alpha.json.id}`
          const fiber = yield* Effect.forkChild(
            api("PUT", "/v1/workspaces/beta/name", { key, body: { name: "gamma" } })
          )
          // Seen waiting on the lock (the statistics' snapshot is taken once a transaction: cleared each time).
          yield* sql<{ waiting: number }>`
            SELECT pg_stat_clear_snapshot(), count(*)::int AS waiting FROM pg_stat_activity
            WHERE wait_event_type = 'Lock' AND query LIKE '%UPDATE workspaces SET name = $1%'`.pipe(
            Effect.map((rows) => rows[0]?.waiting ?? 0),
            Effect.repeat({ schedule: Schedule.spaced("20 millis"), until: (waiting) => waiting > 0 }),
            Effect.timeout("20 seconds")
          )
          return fiber
        })
      )
      const answer = yield* Fiber.join(renamed)
      assert.strictEqual(answer.status, 409, answer.text)
      assert.strictEqual(answer.json.error.code, "workspace_conflict")
      const names = yield* api("GET", "/v1/workspaces", { key })
      assert.sameMembers(
        names.json.data.map((w: any) => w.name),
        ["gamma", "beta"]
      )
    })
  )

  it.effect(
    "routes: names, generated or chosen, rename, template, errors in the API's error shape, delete",
    () =>
      Effect.gen(function* () {
        const { key } = yield* Effect.flatMap(TestService.TestService, (s) => signUp(s.baseUrl))
        const other = yield* Effect.flatMap(TestService.TestService, (s) => signUp(s.baseUrl))
        const generated = yield* api("POST", "/v1/workspaces", { key, body: {} })
        assert.strictEqual(generated.status, 200, generated.text)
        assert.match(generated.json.name, /^[a-z]+-[a-z]+-\d{4}$/)
        assert.include(generated.json, {
          persistence: true,
          template: false,
          assistant_home: false,
          status: "ready",
          active_session_id: null,
          last_session_id: null,
          node_endpoint: null,
          used_bytes: 0
        })
        const named = yield* api("POST", "/v1/workspaces", {
          key,
          body: { name: "my-site", session_type: "browser" }
        })
        assert.strictEqual(named.json.name, "my-site")
        const taken = yield* api("POST", "/v1/workspaces", { key, body: { name: "my-site" } })
        assert.strictEqual(taken.status, 409)
        assert.deepStrictEqual(taken.json, {
          error: { code: "workspace_conflict", message: "A workspace named my-site exists already." }
        })
        const otherAccount = yield* api("POST", "/v1/workspaces", {
          key: other.key,
          body: { name: "my-site" }
        })
        assert.strictEqual(otherAccount.status, 200, "names are unique per account")
        const badSlug = yield* api("POST", "/v1/workspaces", { key, body: { name: "My Site!" } })
        assert.deepStrictEqual(badSlug.json, {
          error: { code: "invalid_field", message: "Invalid value for field: name." }
        })
        const browserImage = yield* api("POST", "/v1/workspaces", {
          key,
          body: { session_type: "browser", image: "debian" }
        })
        assert.deepStrictEqual(browserImage.json.error, {
          code: "invalid_field",
          message: "Invalid value for field: image."
        })

        const byName = yield* api("GET", "/v1/workspaces/my-site", { key })
        const byId = yield* api("GET", `/v1/workspaces/${named.json.id}`, { key })
        assert.deepStrictEqual(byName.json, byId.json)
        const foreign = yield* api("GET", `/v1/workspaces/${otherAccount.json.id}`, { key })
        assert.strictEqual(foreign.status, 404)
        assert.deepStrictEqual(foreign.json, {
          error: { code: "workspace_not_found", message: "Workspace not found." }
        })
        const cloneForeign = yield* api("POST", "/v1/workspaces", {
          key,
          body: { clone_from: otherAccount.json.id }
        })
        assert.strictEqual(cloneForeign.status, 404, "another account's workspace cannot be cloned")

        const renamed = yield* api("PUT", "/v1/workspaces/my-site/name", { key, body: { name: "shop" } })
        assert.deepStrictEqual(renamed.json, { id: named.json.id, name: "shop" })
        const clash = yield* api("PUT", `/v1/workspaces/${generated.json.id}/name`, {
          key,
          body: { name: "shop" }
        })
        assert.strictEqual(clash.status, 409)
        const cleared = yield* api("PUT", "/v1/workspaces/shop/name", { key, body: { name: null } })
        assert.match(cleared.json.name, /^[a-z]+-[a-z]+-\d{4}$/, "a cleared name is a generated one")
        yield* api("PUT", `/v1/workspaces/${named.json.id}/name`, { key, body: { name: "shop" } })

        const template = yield* api("PUT", "/v1/workspaces/shop/template", { key })
        assert.isTrue(template.json.template, "no body: toggled")
        const untemplate = yield* api("PUT", "/v1/workspaces/shop/template", {
          key,
          body: { template: false }
        })
        assert.isFalse(untemplate.json.template)

        const list = yield* api("GET", "/v1/workspaces", { key })
        assert.deepStrictEqual(
          list.json.data.map((w: any) => w.name).sort(),
          [generated.json.name, "shop"].sort()
        )
        const bulk = yield* api("POST", "/v1/workspaces/bulk-delete", {
          key,
          body: { workspaces: [generated.json.name, "nope"] }
        })
        assert.deepStrictEqual(bulk.json, {
          deleted: [generated.json.name],
          skipped: [{ workspace: "nope", code: "workspace_not_found", message: "Workspace not found." }]
        })
        const deleted = yield* api("DELETE", "/v1/workspaces/shop", { key })
        assert.strictEqual(deleted.status, 204)
        const gone = yield* api("GET", "/v1/workspaces/shop", { key })
        assert.strictEqual(gone.status, 404)
      })
  )

  it.effect(
    "a login survives from one session to the next; without persistence a session's changes are dropped; one session at a time",
    () =>
      Effect.gen(function* () {
        const { key } = yield* Effect.flatMap(TestService.TestService, (s) => signUp(s.baseUrl))
        const site = yield* loginSite
        const ws = yield* api("POST", "/v1/workspaces", { key, body: { name: "logged-in" } })
        assert.strictEqual(ws.status, 200, ws.text)

        const first = yield* inSession(key, { workspace: "logged-in" }, async (page) => {
          await page.goto(site)
          await Promise.all([page.waitForNavigation(), page.click("#login")])
          await page.evaluate(() => localStorage.setItem("note", "kept"))
          return page.$eval("#who", (el) => el.textContent)
        })
        assert.strictEqual(first.answer, "logged in as alice")
        assert.strictEqual(first.session.workspace_id, ws.json.id)
        assert.isTrue(first.session.persistence)

        // Measured once its browser has closed and given the disk back, just after the session ended.
        let after = yield* api("GET", "/v1/workspaces/logged-in", { key })
        for (let i = 0; i < 100 && after.json.used_bytes === 0; i++) {
          yield* Effect.sleep("100 millis")
          after = yield* api("GET", "/v1/workspaces/logged-in", { key })
        }
        assert.strictEqual(after.json.last_session_id, first.session.id)
        assert.isNull(after.json.active_session_id)
        assert.isNotNull(after.json.node_endpoint, "its disk lives on this node now")
        assert.isAbove(after.json.used_bytes, 0)

        const second = yield* inSession(key, { workspace: "logged-in" }, look(site))
        assert.deepStrictEqual(second.answer, { who: "logged in as alice", note: "kept" })

        // Without persistence: the session sees what the workspace holds, and what it changes is dropped.
        const scratch = yield* inSession(key, { workspace: ws.json.id, persistence: false }, async (page) => {
          const seen = await look(site)(page)
          await page.evaluate(() => localStorage.setItem("note", "dropped"))
          return seen
        })
        assert.deepStrictEqual(scratch.answer, { who: "logged in as alice", note: "kept" })
        assert.isFalse(scratch.session.persistence)
        const third = yield* inSession(key, { workspace: "logged-in" }, look(site))
        assert.strictEqual(third.answer.note, "kept")

        // One open session per workspace.
        const service = yield* TestService.TestService
        const open = yield* api("POST", "/v1/sessions", { key, body: { workspace: "logged-in" } })
        assert.strictEqual(open.status, 201)
        const twice = yield* api("POST", "/v1/sessions", { key, body: { workspace: "logged-in" } })
        assert.strictEqual(twice.status, 409)
        assert.strictEqual(twice.json.error.code, "workspace_conflict")
        assert.include(twice.json.error.message, open.json.id)
        const busy = yield* api("GET", "/v1/workspaces/logged-in", { key })
        assert.strictEqual(busy.json.active_session_id, open.json.id)
        const deleteBusy = yield* api("DELETE", "/v1/workspaces/logged-in", { key })
        assert.strictEqual(deleteBusy.status, 409)
        const snapshotBusy = yield* api("POST", "/v1/workspaces/logged-in/snapshots", { key, body: {} })
        assert.strictEqual(snapshotBusy.status, 409)
        yield* waitForSession(service.baseUrl, key, open.json.id, isReady)
        yield* api("DELETE", `/v1/sessions/${open.json.id}`, { key })

        // A job on the workspace loads the page logged in.
        const job = yield* api("POST", "/v1/jobs", {
          key,
          body: { kind: "content", input: { url: site, workspace: "logged-in" } }
        })
        assert.strictEqual(job.status, 201, job.text)
        let done = job.json
        for (let i = 0; i < 300 && !["succeeded", "failed"].includes(done.state); i++) {
          yield* Effect.sleep("100 millis")
          done = (yield* api("GET", `/v1/jobs/${job.json.id}`, { key })).json
        }
        assert.strictEqual(done.state, "succeeded", JSON.stringify(done))
        assert.include(done.result.text, "logged in as alice")
        const noSuch = yield* api("POST", "/v1/jobs", {
          key,
          body: { kind: "content", input: { url: site, workspace: "nowhere" } }
        })
        assert.strictEqual(noSuch.json.error.message, "Invalid value for field: input.workspace.")

        const unknown = yield* api("POST", "/v1/sessions", { key, body: { workspace: "nowhere" } })
        assert.strictEqual(unknown.status, 404)
        assert.strictEqual(unknown.json.error.code, "workspace_not_found")
        const stray = yield* api("POST", "/v1/sessions", { key, body: { persistence: true } })
        assert.strictEqual(stray.json.error.message, "Invalid value for field: persistence.")
      }),
    180_000
  )

  it.effect("a sandbox workspace is the home of its sessions: files stay, and its image is pinned", () =>
    Effect.gen(function* () {
      const service = yield* TestService.TestService
      const { key } = yield* signUp(service.baseUrl)
      const ws = yield* api("POST", "/v1/workspaces", { key, body: { name: "code", image: "debian" } })
      assert.strictEqual(ws.status, 200, ws.text)
      assert.include(ws.json, { session_type: "sandbox", image: "debian" })
      const run = (command: string, extra: Record<string, unknown> = {}) =>
        Effect.gen(function* () {
          const created = yield* api("POST", "/v1/sessions", { key, body: { workspace: "code", ...extra } })
          assert.strictEqual(created.status, 201, created.text)
          const session = yield* waitForSession(service.baseUrl, key, created.json.id, isReady)
          const exec = yield* api("POST", `/v1/sessions/${session.id}/exec`, { key, body: { command } })
          assert.strictEqual(exec.status, 200, exec.text)
          yield* api("DELETE", `/v1/sessions/${session.id}`, { key })
          yield* waitForSession(service.baseUrl, key, session.id, (s) => s.status === "closed")
          return { session, exec: exec.json }
        })
      const first = yield* run(
        "cd ~ && mkdir -p proj && echo hello > proj/notes.txt && id -u && stat -c %u proj"
      )
      assert.strictEqual(first.session.session_type, "sandbox", "the workspace's kind, not the default")
      assert.strictEqual(first.session.image, "debian")
      assert.strictEqual(first.exec.stdout, "0\n0\n", "the sandbox's root owns its home")
      const second = yield* run("cat ~/proj/notes.txt && echo more >> ~/proj/notes.txt")
      assert.strictEqual(second.exec.stdout, "hello\n", "a file from the session before")
      const scratch = yield* run("echo scratch > ~/proj/notes.txt && cat ~/proj/notes.txt", {
        persistence: false
      })
      assert.strictEqual(scratch.exec.stdout, "scratch\n")
      const third = yield* run("cat ~/proj/notes.txt")
      assert.strictEqual(
        third.exec.stdout,
        "hello\nmore\n",
        "what the session without persistence wrote is gone"
      )

      // A command job on the workspace sees its files.
      const job = yield* api("POST", "/v1/jobs", {
        key,
        body: { kind: "exec", input: { command: "cat ~/proj/notes.txt", workspace: "code" } }
      })
      assert.strictEqual(job.status, 201, job.text)
      let done = job.json
      for (let i = 0; i < 300 && !["succeeded", "failed"].includes(done.state); i++) {
        yield* Effect.sleep("100 millis")
        done = (yield* api("GET", `/v1/jobs/${job.json.id}`, { key })).json
      }
      assert.strictEqual(done.state, "succeeded", JSON.stringify(done))
      assert.strictEqual(done.result.stdout, "hello\nmore\n")

      const wrongKind = yield* api("POST", "/v1/sessions", {
        key,
        body: { workspace: "code", session_type: "browser" }
      })
      assert.deepStrictEqual(wrongKind.json.error, {
        code: "invalid_field",
        message: "Invalid value for field: session_type."
      })
    })
  )

  it.effect(
    "imports a repository: git runs in a sandbox on the workspace, through its metering proxy; a ref; a failed clone keeps nothing",
    () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const { key } = yield* signUp(service.baseUrl)
        const repo = yield* GitServer.serve
        const imported = yield* api("POST", "/v1/workspaces/import", { key, body: { url: repo.url } })
        assert.strictEqual(imported.status, 200, imported.text)
        assert.include(imported.json, {
          name: "demo",
          session_type: "sandbox",
          github_repo: repo.url,
          status: "ready"
        })
        assert.isNotEmpty(repo.requests, "the code host was asked")
        const pinned = yield* api("POST", "/v1/workspaces/import", {
          key,
          body: { url: repo.url, ref: "v1", name: "demo-v1" }
        })
        assert.strictEqual(pinned.status, 200, pinned.text)

        const read = (workspace: string) =>
          Effect.gen(function* () {
            const created = yield* api("POST", "/v1/sessions", { key, body: { workspace } })
            assert.strictEqual(created.status, 201, created.text)
            const session = yield* waitForSession(service.baseUrl, key, created.json.id, isReady)
            const exec = yield* api("POST", `/v1/sessions/${session.id}/exec`, {
              key,
              body: { command: "cat ~/README.md && git -C ~ rev-parse HEAD && ls -A ~" }
            })
            yield* api("DELETE", `/v1/sessions/${session.id}`, { key })
            return exec.json.stdout as string
          })
        assert.strictEqual(yield* read("demo"), `v2\n${repo.head}\n.git\nREADME.md\nsrc\n`)
        assert.strictEqual(yield* read("demo-v1"), `v1\n${repo.v1}\n.git\nREADME.md\n`)

        // The clone's bytes came through the import session's proxy, and were metered there.
        const jobs = yield* api("GET", "/v1/jobs?kind=import", { key })
        assert.lengthOf(jobs.json.data, 2)
        const job = jobs.json.data.find((j: any) => j.result?.workspace_id === imported.json.id)
        assert.strictEqual(job.result.commit, repo.head)
        const session = yield* api("GET", `/v1/sessions/${job.session_id}`, { key })
        assert.isAbove(session.json.bytes_down, 0)

        const missing = yield* api("POST", "/v1/workspaces/import", {
          key,
          body: { url: repo.url.replace("demo.git", "nothing.git"), name: "nothing" }
        })
        assert.strictEqual(missing.status, 400)
        assert.strictEqual(missing.json.error.code, "import_failed")
        assert.include(missing.json.error.message, "nothing.git")
        const kept = yield* api("GET", "/v1/workspaces/nothing", { key })
        assert.strictEqual(kept.status, 404, "a failed import keeps no workspace")
        for (const url of [
          "file:///etc",
          repo.url.replace("://", "://user:token@"),
          `${repo.url}?private_token=x`
        ]) {
          const refused = yield* api("POST", "/v1/workspaces/import", { key, body: { url } })
          assert.deepStrictEqual(
            refused.json.error,
            { code: "invalid_field", message: "Invalid value for field: url." },
            `${url}: no credentials are ever stored`
          )
        }
      }),
    180_000
  )

  it.effect(
    "a workspace in use is measured while its session runs: the account's storage counts it live",
    () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const { key } = yield* signUp(service.baseUrl)
        const ws = yield* api("POST", "/v1/workspaces", { key, body: { name: "live", image: "debian" } })
        assert.strictEqual(ws.status, 200, ws.text)
        const created = yield* api("POST", "/v1/sessions", { key, body: { workspace: "live" } })
        const session = yield* waitForSession(service.baseUrl, key, created.json.id, isReady)
        const wrote = yield* api("POST", `/v1/sessions/${session.id}/exec`, {
          key,
          body: { command: "head -c 3000000 /dev/urandom > ~/blob && echo ok" }
        })
        assert.strictEqual(wrote.json.stdout, "ok\n", wrote.text)
        const measured = yield* until(
          Effect.map(api("GET", "/v1/workspaces/live", { key }), (r) => r.json.used_bytes as number),
          (bytes) => bytes >= 3_000_000,
          10_000
        )
        assert.isAtLeast(measured, 3_000_000)
        const still = yield* api("GET", `/v1/sessions/${session.id}`, { key })
        assert.strictEqual(still.json.status, "ready", "measured while the session is open, not at its end")
        yield* api("DELETE", `/v1/sessions/${session.id}`, { key })
      })
  )

  it.effect("snapshots and restores round trip the content; clones and templates copy it", () =>
    Effect.gen(function* () {
      const { key } = yield* Effect.flatMap(TestService.TestService, (s) => signUp(s.baseUrl))
      const site = yield* loginSite
      yield* api("POST", "/v1/workspaces", { key, body: { name: "notes" } })
      const write = (note: string) =>
        inSession(key, { workspace: "notes" }, async (page) => {
          await page.goto(site)
          await page.evaluate((value) => localStorage.setItem("note", value), note)
        })
      yield* write("one")
      const snap = yield* api("POST", "/v1/workspaces/notes/snapshots", { key, body: { name: "first" } })
      assert.strictEqual(snap.status, 200, snap.text)
      assert.include(snap.json, { name: "first", restored_at: null })
      assert.isAbove(snap.json.used_bytes, 0)
      const again = yield* api("POST", "/v1/workspaces/notes/snapshots", { key, body: { name: "first" } })
      assert.strictEqual(again.status, 409, "a snapshot name is unique in its workspace")
      const unnamed = yield* api("POST", "/v1/workspaces/notes/snapshots", { key })
      assert.strictEqual(unnamed.status, 200, unnamed.text)
      assert.match(unnamed.json.name, /^snap-[0-9a-f]{8}$/)

      yield* write("two")
      const restored = yield* api("POST", "/v1/workspaces/notes/snapshots/first/restore", { key })
      assert.strictEqual(restored.status, 200, restored.text)
      assert.isString(restored.json.restored_at)
      const back = yield* inSession(key, { workspace: "notes" }, look(site))
      assert.strictEqual(back.answer.note, "one", "the snapshot's content, not the later one")

      const missing = yield* api("POST", "/v1/workspaces/notes/snapshots/none/restore", { key })
      assert.strictEqual(missing.status, 404)
      assert.deepStrictEqual(missing.json, {
        error: { code: "snapshot_not_found", message: "Snapshot not found." }
      })
      const listed = yield* api("GET", "/v1/workspaces/notes/snapshots", { key })
      assert.deepStrictEqual(
        listed.json.data.map((s: any) => s.name),
        [unnamed.json.name, "first"]
      )

      // A template: no session opens it; a clone of it starts with its content.
      const template = yield* api("PUT", "/v1/workspaces/notes/template", { key, body: { template: true } })
      assert.isTrue(template.json.template)
      const refused = yield* api("POST", "/v1/sessions", { key, body: { workspace: "notes" } })
      assert.strictEqual(refused.status, 409)
      assert.include(refused.json.error.message, "template")
      const clone = yield* api("POST", "/v1/workspaces", {
        key,
        body: { name: "notes-copy", clone_from: "notes" }
      })
      assert.strictEqual(clone.status, 200, clone.text)
      assert.include(clone.json, { source_workspace_id: template.json.id, status: "ready", template: false })
      const copied = yield* inSession(key, { workspace: "notes-copy" }, look(site))
      assert.strictEqual(copied.answer.note, "one")

      const removed = yield* api("DELETE", `/v1/workspaces/notes/snapshots/${unnamed.json.name}`, { key })
      assert.strictEqual(removed.status, 204)
      const jobs = yield* api("GET", "/v1/jobs?kind=snapshot", { key })
      assert.lengthOf(jobs.json.data, 2, "snapshots are jobs, listed with the others")
      assert.isTrue(jobs.json.data.every((j: any) => j.state === "succeeded"))
    })
  )
})
