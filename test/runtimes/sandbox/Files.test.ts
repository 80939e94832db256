import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { createClient } from "../../../src/edge/client/client.ts"
import { isReady, request, signUp, waitForSession } from "../../support/Client.ts"
import * as Sse from "../../support/Sse.ts"
import * as TestService from "../../support/TestService.ts"

// The files API of a real runc sandbox: listed by pages, a path's entry, mkdir, move, remove, and
// directory watches whose changes stream as server-sent events from inside the sandbox.

layer(TestService.layer({ browserPoolSize: 0, sandbox: { poolSize: 1 } }), { excludeTestServices: true })(
  "sandbox files",
  (it) => {
    const api = (method: string, path: string, options?: Parameters<typeof request>[3]) =>
      Effect.flatMap(TestService.TestService, (service) => request(service.baseUrl, method, path, options))

    const sandbox = Effect.gen(function* () {
      const service = yield* TestService.TestService
      const account = yield* signUp(service.baseUrl)
      const created = yield* api("POST", "/v1/sessions", {
        key: account.key,
        body: { session_type: "sandbox" }
      })
      assert.strictEqual(created.status, 201, created.text)
      const session = yield* waitForSession(service.baseUrl, account.key, created.json.id, isReady)
      return { service, account, id: session.id as string, key: account.key }
    })

    const sh = (key: string, id: string, command: string) =>
      Effect.gen(function* () {
        const ran = yield* api("POST", `/v1/sessions/${id}/exec`, { key, body: { command } })
        assert.strictEqual(ran.json.exit_code, 0, ran.text)
      })

    it.effect(
      "a directory listed by pages, a path's entry, mkdir, move and remove, each refusal in its shape",
      () =>
        Effect.gen(function* () {
          const { account, id, key } = yield* sandbox
          const files = (query: string) => api("GET", `/v1/sessions/${id}/files?${query}`, { key })
          yield* sh(
            key,
            id,
            "mkdir -p /root/t/sub && printf 12345 > /root/t/b.txt && chmod 600 /root/t/b.txt && : > /root/t/a && ln -s ../t/b.txt /root/t/link && touch -d @1700000000 /root/t/a"
          )

          const all = yield* files("path=/root/t")
          assert.strictEqual(all.status, 200, all.text)
          assert.deepStrictEqual(
            all.json.data.map((entry: { name: string; type: string }) => [entry.name, entry.type]),
            [
              ["a", "file"],
              ["b.txt", "file"],
              ["link", "symlink"],
              ["sub", "directory"]
            ]
          )
          assert.isFalse(all.json.has_more)
          assert.isNull(all.json.next_cursor)
          const b = all.json.data[1]
          assert.include(b, {
            object: "file",
            path: "/root/t/b.txt",
            size: 5,
            mode: "0600",
            symlink_target: null
          })
          assert.strictEqual(all.json.data[0].modified_at, "2023-11-14T22:13:20.000Z")
          assert.strictEqual(
            all.json.data[2].symlink_target,
            "../t/b.txt",
            "a link shown as a link, not followed"
          )

          // Pages of two, by name, each after the last one's cursor; a relative path starts at /root.
          const first = yield* files("path=t&limit=2")
          assert.deepStrictEqual(
            first.json.data.map((entry: { name: string }) => entry.name),
            ["a", "b.txt"]
          )
          assert.isTrue(first.json.has_more)
          const second = yield* files(`path=t&limit=2&cursor=${first.json.next_cursor}`)
          assert.deepStrictEqual(
            second.json.data.map((entry: { name: string }) => entry.name),
            ["link", "sub"]
          )
          assert.isFalse(second.json.has_more)
          assert.strictEqual((yield* files("path=t&limit=0")).json.error.code, "invalid_field")
          assert.strictEqual((yield* files("path=t&limit=1001")).json.error.code, "invalid_field")
          assert.strictEqual((yield* files("path=t&cursor=%2F%2F")).json.error.code, "invalid_field")
          const home = yield* files("")
          assert.isTrue(
            home.json.data.some((entry: { name: string }) => entry.name === "t"),
            "no path: the home, /root"
          )

          const missing = yield* files("path=/root/nothing")
          assert.strictEqual(missing.status, 404)
          assert.strictEqual(missing.json.error.code, "file_not_found")
          const notDir = yield* files("path=/root/t/b.txt")
          assert.strictEqual(notDir.status, 409)
          assert.strictEqual(notDir.json.error.code, "wrong_file_type")
          const climbing = yield* files("path=/root/../../etc")
          assert.strictEqual(climbing.status, 400)
          assert.deepStrictEqual(climbing.json.error, {
            code: "invalid_field",
            message: "Invalid value for field: path."
          })

          const stat = yield* api("GET", `/v1/sessions/${id}/files/stat?path=/root/t/link`, { key })
          assert.include(stat.json, { name: "link", path: "/root/t/link", type: "symlink" })
          assert.strictEqual(
            (yield* api("GET", `/v1/sessions/${id}/files/stat?path=/`, { key })).json.type,
            "directory"
          )

          // mkdir: alone, with parents, onto what is there.
          const mkdir = (body: unknown) => api("POST", `/v1/sessions/${id}/files/mkdir`, { key, body })
          const made = yield* mkdir({ path: "/root/t/new" })
          assert.strictEqual(made.status, 201, made.text)
          assert.include(made.json, { path: "/root/t/new", type: "directory", mode: "0755" })
          assert.strictEqual((yield* mkdir({ path: "/root/t/new" })).json.error.code, "file_exists")
          assert.strictEqual((yield* mkdir({ path: "/root/t/x/y/z" })).json.error.code, "file_not_found")
          assert.strictEqual((yield* mkdir({ path: "/root/t/x/y/z", parents: true })).status, 201)
          assert.strictEqual(
            (yield* mkdir({ path: "/root/t/x/y/z", parents: true })).status,
            201,
            "there already"
          )
          assert.strictEqual(
            (yield* mkdir({ path: "/root/t/b.txt", parents: true })).json.error.code,
            "file_exists"
          )
          assert.strictEqual(
            (yield* mkdir({ path: "/root/t/b.txt/under" })).json.error.code,
            "wrong_file_type"
          )
          assert.strictEqual((yield* mkdir({ path: "/" })).json.error.code, "invalid_field")
          assert.strictEqual((yield* mkdir({})).status, 400)

          // move: onto a free name, onto a taken one (refused, then replaced), a directory into itself.
          const move = (body: unknown) => api("POST", `/v1/sessions/${id}/files/move`, { key, body })
          const moved = yield* move({ from: "/root/t/a", to: "/root/t/renamed" })
          assert.strictEqual(moved.status, 200, moved.text)
          assert.include(moved.json, { path: "/root/t/renamed", type: "file" })
          const taken = yield* move({ from: "/root/t/renamed", to: "/root/t/b.txt" })
          assert.strictEqual(taken.status, 409)
          assert.strictEqual(taken.json.error.code, "file_exists")
          assert.strictEqual(
            (yield* move({ from: "/root/t/renamed", to: "/root/t/b.txt", overwrite: true })).status,
            200
          )
          const replaced = yield* api("GET", `/v1/sessions/${id}/files/stat?path=/root/t/b.txt`, { key })
          assert.strictEqual(replaced.json.size, 0, "the moved file is there now")
          assert.strictEqual(
            (yield* move({ from: "/root/t/gone", to: "/root/t/c" })).json.error.code,
            "file_not_found"
          )
          const intoItself = yield* move({ from: "/root/t/x", to: "/root/t/x/y/inside" })
          assert.deepStrictEqual(intoItself.json.error, {
            code: "invalid_field",
            message: "Invalid value for field: to."
          })
          assert.strictEqual((yield* move({ from: "/", to: "/root/root" })).json.error.code, "invalid_field")

          // remove: a file, a link (not its target), a directory with entries only when recursive.
          const remove = (query: string) => api("DELETE", `/v1/sessions/${id}/files?${query}`, { key })
          assert.strictEqual((yield* remove("path=/root/t/link")).status, 204)
          assert.strictEqual(
            (yield* api("GET", `/v1/sessions/${id}/files/stat?path=/root/t/b.txt`, { key })).status,
            200,
            "a link's target stays"
          )
          const full = yield* remove("path=/root/t/x")
          assert.strictEqual(full.status, 409)
          assert.strictEqual(full.json.error.code, "directory_not_empty")
          assert.strictEqual((yield* remove("path=/root/t/x&recursive=true")).status, 204)
          assert.strictEqual((yield* remove("path=/root/t/x")).json.error.code, "file_not_found")
          assert.strictEqual((yield* remove("path=/")).json.error.code, "invalid_field")
          assert.strictEqual((yield* remove("path=/root/t/../..")).json.error.code, "invalid_field")
          const left = yield* files("path=/root/t")
          assert.deepStrictEqual(
            left.json.data.map((entry: { name: string }) => entry.name),
            ["b.txt", "new", "sub"]
          )

          // The typed client has the same calls, typed, with the routes' errors as their classes.
          const rbs = createClient({ baseUrl: (yield* TestService.TestService).baseUrl, apiKey: key })
          const typed = yield* Effect.promise(() =>
            rbs.sandbox.listFiles({ params: { id }, query: { path: "/root/t", limit: 1 } })
          )
          assert.deepStrictEqual([typed.data[0]?.name, typed.has_more], ["b.txt", true])
          const typedRefusal = yield* Effect.promise(() =>
            rbs.sandbox.makeDirectory({ params: { id }, payload: { path: "/root/t/new" } }).then(
              () => undefined,
              (error: { readonly code?: string }) => error.code
            )
          )
          assert.strictEqual(typedRefusal, "file_exists")

          // Scopes: a key of `files.read` lists; changes are `files.write`'s.
          const reader = (yield* api("POST", "/v1/keys", {
            cookie: account.cookie,
            body: { name: "reader", scopes: ["files.read"] }
          })).json.secret as string
          assert.strictEqual(
            (yield* api("GET", `/v1/sessions/${id}/files?path=/root`, { key: reader })).status,
            200
          )
          const refused = yield* api("POST", `/v1/sessions/${id}/files/mkdir`, {
            key: reader,
            body: { path: "/root/nope" }
          })
          assert.strictEqual(refused.status, 403)
          assert.strictEqual(
            (yield* api("DELETE", `/v1/sessions/${id}/files?path=/root/t/b.txt`, { key: reader })).status,
            403
          )

          const audit = yield* api("GET", "/v1/audit/events?action=file.&limit=200", {
            cookie: account.cookie
          })
          const actions = audit.json.data.map(
            (event: { action: string; outcome: string }) => `${event.action} ${event.outcome}`
          )
          for (const expected of [
            "file.directory_created success",
            "file.moved success",
            "file.removed success",
            "file.removed failure",
            "file.directory_created failure"
          ])
            assert.include(actions, expected)
        })
    )

    it.effect(
      "a watch streams creates, writes, moves and removals below it, resumes after the last event seen, and ends with its directory",
      () =>
        Effect.gen(function* () {
          const { service, id, key } = yield* sandbox
          yield* sh(key, id, "mkdir -p /root/w/old")
          const started = yield* api("POST", `/v1/sessions/${id}/files/watches`, {
            key,
            body: { path: "/root/w", recursive: true }
          })
          assert.strictEqual(started.status, 201, started.text)
          assert.include(started.json, {
            object: "file_watch",
            path: "/root/w",
            recursive: true,
            status: "watching"
          })
          const wid = started.json.id as string
          assert.match(wid, /^fw_/)
          const url = `${service.baseUrl}/v1/sessions/${id}/files/watches/${wid}/events`

          const changes = (events: ReadonlyArray<Sse.SseEvent>) =>
            events.map((event) => {
              const data = JSON.parse(event.data)
              return `${event.event} ${data.path}${data.to === null ? "" : ` ${data.to}`}`
            })
          // A directory made after the watch is followed: the supervisor watches it as it reads its
          // create, before it sends it, so once the create is here, what is done in it is seen too.
          yield* sh(key, id, "mkdir /root/w/d")
          yield* Sse.read(url, key, {
            until: (events) => changes(events).includes("create /root/w/d")
          })
          yield* sh(
            key,
            id,
            "printf x > /root/w/d/f && printf y >> /root/w/old/g && mv /root/w/d/f /root/w/d/h && rm /root/w/old/g"
          )
          const first = yield* Sse.read(url, key, {
            until: (events) => events.some((event) => event.event === "delete")
          })
          const seen = changes(first.events)
          for (const expected of [
            "create /root/w/d",
            "create /root/w/d/f",
            "modify /root/w/d/f",
            "create /root/w/old/g",
            "modify /root/w/old/g",
            "move /root/w/d/f /root/w/d/h",
            "delete /root/w/old/g"
          ])
            assert.include(seen, expected, seen.join("\n"))
          assert.isTrue(JSON.parse(first.events[0]!.data).directory, "d is a directory")
          const ids = first.events.map((event) => Number(event.id))
          assert.deepStrictEqual(
            ids,
            ids.map((_, at) => at + 1)
          )

          // Resumed after the last event seen: only what came after, none twice.
          yield* sh(key, id, "touch /root/w/later")
          const rest = yield* Sse.read(url, key, {
            lastEventId: first.events[first.events.length - 1]!.id,
            until: (events) => events.some((event) => event.event === "create")
          })
          assert.deepStrictEqual(changes(rest.events).slice(0, 1), ["create /root/w/later"])
          assert.strictEqual(Number(rest.events[0]!.id), ids.length + 1)

          const listed = yield* api("GET", `/v1/sessions/${id}/files/watches`, { key })
          assert.deepStrictEqual(
            listed.json.data.map((watch: { id: string }) => watch.id),
            [wid]
          )

          // Its directory removed: the watch ends, and its stream ends after an `end` event.
          yield* sh(key, id, "rm -rf /root/w")
          const ended = yield* Sse.read(url, key, { lastEventId: rest.events[rest.events.length - 1]!.id })
          assert.isTrue(ended.ended, "the stream ends with the watch")
          assert.strictEqual(ended.events[ended.events.length - 1]!.event, "end")
          assert.include(changes(ended.events), "delete /root/w")
          const after = yield* api("GET", `/v1/sessions/${id}/files/watches/${wid}`, { key })
          assert.strictEqual(after.json.status, "ended")
          assert.isNotNull(after.json.ended_at)

          // Bounded: eight at once (the ended one counts until deleted), then 429.
          for (let i = 0; i < 7; i++) {
            const more = yield* api("POST", `/v1/sessions/${id}/files/watches`, {
              key,
              body: { path: "/tmp" }
            })
            assert.strictEqual(more.status, 201, more.text)
          }
          const ninth = yield* api("POST", `/v1/sessions/${id}/files/watches`, {
            key,
            body: { path: "/tmp" }
          })
          assert.strictEqual(ninth.status, 429)
          assert.strictEqual(ninth.json.error.code, "too_many_watches")
          assert.strictEqual(
            (yield* api("DELETE", `/v1/sessions/${id}/files/watches/${wid}`, { key })).status,
            204
          )
          assert.strictEqual(
            (yield* api("GET", `/v1/sessions/${id}/files/watches/${wid}`, { key })).status,
            404
          )
          const notDir = yield* api("POST", `/v1/sessions/${id}/files/watches`, {
            key,
            body: { path: "/etc/hostname" }
          })
          assert.strictEqual(notDir.json.error.code, "wrong_file_type")
          const none = yield* api("POST", `/v1/sessions/${id}/files/watches`, {
            key,
            body: { path: "/nothing" }
          })
          assert.strictEqual(none.json.error.code, "file_not_found")
          const again = yield* api("POST", `/v1/sessions/${id}/files/watches`, {
            key,
            body: { path: "/tmp" }
          })
          assert.strictEqual(again.status, 201, "its place is free")

          const badResume = yield* api(
            "GET",
            `/v1/sessions/${id}/files/watches/${again.json.id}/events?last_event_id=x`,
            {
              key
            }
          )
          assert.strictEqual(badResume.status, 400)
        })
    )
  }
)
