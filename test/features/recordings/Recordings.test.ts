import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { execFileSync } from "node:child_process"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import puppeteer from "puppeteer-core"
import { isReady, request, type RequestOptions, signUp, waitForSession } from "../../support/Client.ts"
import * as LocalPage from "../../support/LocalPage.ts"
import * as TestService from "../../support/TestService.ts"

const api = (method: string, path: string, options?: RequestOptions) =>
  Effect.flatMap(TestService.TestService, (service) => request(service.baseUrl, method, path, options))

/** What ffprobe says of a video file. */
const probe = (file: string) =>
  JSON.parse(
    execFileSync("ffprobe", ["-v", "error", "-show_format", "-show_streams", "-of", "json", file], {
      encoding: "utf8"
    })
  )

/** A session recorded while puppeteer clicks a counter page, then deleted; its id once its video is ready. */
const recordedSession = (clicks: number) =>
  Effect.gen(function* () {
    const service = yield* TestService.TestService
    const account = yield* signUp(service.baseUrl)
    const created = yield* api("POST", "/v1/sessions", { key: account.key, body: { recording: true } })
    assert.strictEqual(created.status, 201, created.text)
    const session = yield* waitForSession(service.baseUrl, account.key, created.json.id, isReady)
    assert.strictEqual(session.recording.status, "recording")
    assert.strictEqual(session.recording.url, `${service.baseUrl}/v1/sessions/${session.id}/recording`)
    const notYet = yield* api("GET", `/v1/sessions/${session.id}/recording`, { key: account.key })
    assert.strictEqual(notYet.status, 404)
    assert.deepStrictEqual(notYet.json, {
      error: { code: "recording_not_ready", message: "The recording is not ready yet." }
    })
    const pages = yield* LocalPage.serve
    const browser = yield* Effect.promise(() =>
      puppeteer.connect({
        browserWSEndpoint: session.cdp_url,
        headers: { Authorization: `Bearer ${account.key}` },
        defaultViewport: null
      })
    )
    const [page] = yield* Effect.promise(() => browser.pages())
    yield* Effect.promise(() => page!.goto(`${pages}counter`))
    for (let i = 0; i < clicks; i++) {
      yield* Effect.promise(() => page!.click("#button"))
      yield* Effect.sleep("300 millis")
    }
    yield* Effect.promise(() => browser.disconnect())
    assert.strictEqual((yield* api("DELETE", `/v1/sessions/${session.id}`, { key: account.key })).status, 204)
    const ready = yield* waitForSession(
      service.baseUrl,
      account.key,
      session.id,
      (s) => s.recording?.status === "ready" || s.recording?.status === "failed",
      60_000
    )
    assert.strictEqual(ready.recording.status, "ready", JSON.stringify(ready.recording))
    return { service, account, session: ready }
  })

layer(TestService.layer(), { excludeTestServices: true })("recordings", (it) => {
  it.effect("records a session's screen into a WebM that plays for as long as the session ran", () =>
    Effect.gen(function* () {
      const { account, session, service } = yield* recordedSession(4)
      const ranFor = Date.parse(session.ended_at) - Date.parse(session.ready_at)
      assert.isAbove(session.recording.frames, 4, "the clicks changed the page: frames")
      const video = yield* api("GET", `/v1/sessions/${session.id}/recording`, { key: account.key })
      assert.strictEqual(video.status, 200)
      assert.strictEqual(video.headers.get("content-type"), "video/webm")
      assert.strictEqual(video.headers.get("accept-ranges"), "bytes")
      assert.strictEqual(Number(video.headers.get("content-length")), video.bytes.length)
      assert.strictEqual(video.bytes.length, session.recording.bytes)
      assert.deepStrictEqual([...video.bytes.slice(0, 4)], [0x1a, 0x45, 0xdf, 0xa3], "an EBML (WebM) file")
      const file = Path.join(service.config.dataDir, "probe.webm")
      yield* Effect.promise(() => Fs.writeFile(file, video.bytes))
      const probed = probe(file)
      assert.strictEqual(probed.streams[0].codec_name, "vp9")
      assert.deepStrictEqual([probed.streams[0].width, probed.streams[0].height], [1280, 720])
      const seconds = Number(probed.format.duration)
      assert.approximately(seconds * 1000, session.recording.duration_ms, 300)
      // From the first frame to the session's end: as long as it ran, give or take a frame.
      assert.approximately(session.recording.duration_ms, ranFor, 1500)
      // The spool is gone; the video is in the blob store.
      const spools = yield* Effect.promise(() =>
        Fs.readdir(Path.join(service.config.dataDir, "recordings")).catch(() => [])
      )
      assert.deepStrictEqual(spools, [])
      const stored = yield* Effect.promise(() =>
        Fs.stat(Path.join(service.config.dataDir, "blobs", "recordings", `${session.id}.webm`))
      )
      assert.strictEqual(stored.size, session.recording.bytes)
    })
  )

  it.effect("answers ranges for seeking players, and 416 past the end", () =>
    Effect.gen(function* () {
      const { account, session } = yield* recordedSession(1)
      const path = `/v1/sessions/${session.id}/recording`
      const whole = (yield* api("GET", path, { key: account.key })).bytes
      const part = yield* api("GET", path, { key: account.key, headers: { range: "bytes=10-99" } })
      assert.strictEqual(part.status, 206)
      assert.strictEqual(part.headers.get("content-range"), `bytes 10-99/${whole.length}`)
      assert.deepStrictEqual([...part.bytes], [...whole.slice(10, 100)])
      const tail = yield* api("GET", path, { key: account.key, headers: { range: "bytes=-5" } })
      assert.deepStrictEqual([...tail.bytes], [...whole.slice(-5)])
      const past = yield* api("GET", path, { key: account.key, headers: { range: `bytes=${whole.length}-` } })
      assert.strictEqual(past.status, 416)
      assert.strictEqual(past.headers.get("content-range"), `bytes */${whole.length}`)
    })
  )

  it.effect("is the account's own: another account gets 404, a session recorded without has none", () =>
    Effect.gen(function* () {
      const { account, session, service } = yield* recordedSession(1)
      const stranger = yield* signUp(service.baseUrl)
      const foreign = yield* api("GET", `/v1/sessions/${session.id}/recording`, { key: stranger.key })
      assert.strictEqual(foreign.status, 404)
      assert.strictEqual(foreign.json.error.code, "session_not_found")
      const plain = yield* api("POST", "/v1/sessions", { key: account.key, body: {} })
      const view = yield* api("GET", `/v1/sessions/${plain.json.id}`, { key: account.key })
      assert.isNull(view.json.recording)
      const none = yield* api("GET", `/v1/sessions/${plain.json.id}/recording`, { key: account.key })
      assert.deepStrictEqual(none.json, {
        error: { code: "recording_not_found", message: "This session has no recording." }
      })
      for (const value of ["yes", 1, null]) {
        const refused = yield* api("POST", "/v1/sessions", { key: account.key, body: { recording: value } })
        assert.strictEqual(refused.json.error.message, "Invalid value for field: recording.")
      }
      yield* api("DELETE", `/v1/sessions/${plain.json.id}`, { key: account.key })
    })
  )

  it.effect(
    "is never billed as egress: downloading it leaves the session's bytes and the ledger as they were",
    () =>
      Effect.gen(function* () {
        const { account, session } = yield* recordedSession(1)
        const summary = (yield* api("GET", "/v1/billing/summary", { key: account.key })).json
        for (let i = 0; i < 3; i++)
          yield* api("GET", `/v1/sessions/${session.id}/recording`, { key: account.key })
        const after = yield* api("GET", `/v1/sessions/${session.id}`, { key: account.key })
        assert.strictEqual(after.json.bytes_up, session.bytes_up)
        assert.strictEqual(after.json.bytes_down, session.bytes_down)
        assert.deepStrictEqual((yield* api("GET", "/v1/billing/summary", { key: account.key })).json, summary)
      })
  )

  it.effect("DELETE removes the video for good", () =>
    Effect.gen(function* () {
      const { account, session, service } = yield* recordedSession(1)
      const path = `/v1/sessions/${session.id}/recording`
      const viewer = yield* api("POST", "/v1/keys", {
        cookie: account.cookie,
        body: { name: "viewer", scopes: ["sessions.read"] }
      })
      assert.strictEqual((yield* api("DELETE", path, { key: viewer.json.secret })).status, 403)
      assert.strictEqual((yield* api("DELETE", path, { key: account.key })).status, 204)
      const gone = yield* api("GET", path, { key: account.key })
      assert.strictEqual(gone.json.error.code, "recording_not_found")
      assert.strictEqual((yield* api("DELETE", path, { key: account.key })).status, 404)
      const file = Path.join(service.config.dataDir, "blobs", "recordings", `${session.id}.webm`)
      assert.isFalse(
        yield* Effect.promise(() =>
          Fs.access(file).then(
            () => true,
            () => false
          )
        )
      )
      const audit = yield* api("GET", "/v1/audit/events?action=session.recording_deleted&outcome=success", {
        cookie: account.cookie
      })
      assert.strictEqual(audit.json.data?.length ?? audit.json.events?.length, 1)
    })
  )
})
