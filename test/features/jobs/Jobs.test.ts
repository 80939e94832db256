import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { PNG_SIGNATURE, pngSize, request, signUp, waitForSession } from "../../support/Client.ts"
import * as LocalPage from "../../support/LocalPage.ts"
import * as TestService from "../../support/TestService.ts"
import * as WebhookReceiver from "../../support/WebhookReceiver.ts"

const FINISHED = ["succeeded", "failed", "cancelled"]

layer(
  TestService.layer({ browserPoolSize: 1, sandbox: { poolSize: 1 }, webhookAllowCidrs: "127.0.0.1/32" }),
  { excludeTestServices: true }
)("jobs", (it) => {
  const api = (method: string, path: string, options?: Parameters<typeof request>[3]) =>
    Effect.flatMap(TestService.TestService, (service) => request(service.baseUrl, method, path, options))

  /** Polls a job (real time, 60 s at most) until `done` holds. */
  const waitForJob = (
    key: string,
    id: string,
    done: (job: any) => boolean = (job) => FINISHED.includes(job.state)
  ) =>
    Effect.gen(function* () {
      const deadline = Date.now() + 60_000
      while (true) {
        const job = yield* api("GET", `/v1/jobs/${id}`, { key })
        assert.strictEqual(job.status, 200, job.text)
        if (done(job.json)) return job.json
        if (Date.now() > deadline) return assert.fail(`job ${id} never got there: ${job.text}`)
        yield* Effect.sleep("100 millis")
      }
    })

  const submit = (key: string, kind: string, input: unknown) =>
    Effect.gen(function* () {
      const created = yield* api("POST", "/v1/jobs", { key, body: { kind, input } })
      assert.strictEqual(created.status, 201, created.text)
      assert.match(created.json.id, /^job_[0-9a-f-]{36}$/)
      assert.include(created.json, { object: "job", kind, state: "queued", attempts: 0, attempt_limit: 3 })
      return created.json.id as string
    })

  it.effect("lists its kinds with their input schemas, outside the rate-limit contract", () =>
    Effect.gen(function* () {
      const { key } = yield* Effect.flatMap(TestService.TestService, (s) => signUp(s.baseUrl))
      const kinds = yield* api("GET", "/v1/jobs/kinds", { key })
      assert.strictEqual(kinds.status, 200, kinds.text)
      assert.isNull(kinds.headers.get("x-ratelimit-limit"), "a discovery read carries no rate-limit headers")
      const byKind = new Map<string, any>(kinds.json.kinds.map((kind: any) => [kind.kind, kind]))
      assert.deepStrictEqual([...byKind.keys()].sort(), [
        "content",
        "exec",
        "import",
        "pdf",
        "restore",
        "screenshot",
        "snapshot"
      ])
      const screenshot = byKind.get("screenshot")
      assert.strictEqual(screenshot.input_schema.type, "object")
      assert.deepStrictEqual(screenshot.input_schema.required, ["url"])
      assert.includeMembers(Object.keys(screenshot.input_schema.properties), ["url", "viewport", "full_page"])
      assert.deepStrictEqual(byKind.get("exec").requires, ["sessions.write", "exec.write"])
    })
  )

  it.effect("refuses a kind that does not exist, input its kind refuses, and a key without its scopes", () =>
    Effect.gen(function* () {
      const { key, cookie } = yield* Effect.flatMap(TestService.TestService, (s) => signUp(s.baseUrl))
      const unknown = yield* api("POST", "/v1/jobs", { key, body: { kind: "mine-bitcoin", input: {} } })
      assert.strictEqual(unknown.status, 400)
      assert.deepStrictEqual(unknown.json, {
        error: { code: "invalid_field", message: "Invalid value for field: kind." }
      })
      const noUrl = yield* api("POST", "/v1/jobs", { key, body: { kind: "screenshot", input: {} } })
      assert.strictEqual(noUrl.status, 400)
      assert.strictEqual(noUrl.json.error.message, "Invalid value for field: input.url.")
      const ftp = yield* api("POST", "/v1/jobs", {
        key,
        body: { kind: "pdf", input: { url: "file:///etc/passwd" } }
      })
      assert.strictEqual(ftp.json.error.message, "Invalid value for field: input.url.")
      const viewport = yield* api("POST", "/v1/jobs", {
        key,
        body: { kind: "screenshot", input: { url: "http://127.0.0.1/", viewport: { width: 5, height: 600 } } }
      })
      assert.strictEqual(viewport.json.error.message, "Invalid value for field: input.viewport.")
      const noKind = yield* api("POST", "/v1/jobs", { key, body: { input: {} } })
      assert.strictEqual(noKind.status, 400)
      assert.strictEqual(noKind.json.error.code, "invalid_field")

      // A key scoped to sessions may not run commands.
      const scoped = yield* api("POST", "/v1/keys", {
        cookie,
        body: { name: "sessions only", scopes: ["sessions.read", "sessions.write"] }
      })
      assert.strictEqual(scoped.status, 201, scoped.text)
      const refused = yield* api("POST", "/v1/jobs", {
        key: scoped.json.secret,
        body: { kind: "exec", input: { command: "true" } }
      })
      assert.strictEqual(refused.status, 403)
      assert.strictEqual(refused.json.error.code, "forbidden")

      const missing = yield* api("GET", "/v1/jobs/job_00000000-0000-0000-0000-000000000000", { key })
      assert.strictEqual(missing.status, 404)
      assert.deepStrictEqual(missing.json, { error: { code: "job_not_found", message: "Job not found." } })
      const list = yield* api("GET", "/v1/jobs", { key })
      assert.deepStrictEqual(list.json.data, [], "refusals queue nothing")
    })
  )

  it.effect(
    "screenshot, pdf and content jobs load a page in a fresh session each, keep their bytes, and say so by webhook",
    () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const { key } = yield* signUp(service.baseUrl)
        const pageUrl = yield* LocalPage.serve
        const receiver = yield* WebhookReceiver.serve
        const hook = yield* api("POST", "/v1/webhooks", {
          key,
          body: { url: receiver.url, events: ["job.succeeded", "job.failed"] }
        })
        assert.strictEqual(hook.status, 201, hook.text)

        const shotId = yield* submit(key, "screenshot", {
          url: `${pageUrl}?title=shot`,
          viewport: { width: 640, height: 480 }
        })
        const shot = yield* waitForJob(key, shotId)
        assert.strictEqual(shot.state, "succeeded", JSON.stringify(shot))
        assert.strictEqual(shot.attempts, 1)
        assert.deepStrictEqual(shot.result, {
          url: `${pageUrl}?title=shot`,
          status: 200,
          width: 640,
          height: 480
        })
        assert.strictEqual(shot.result_url, `${service.baseUrl}/v1/jobs/${shotId}/result`)
        assert.strictEqual(shot.result_content_type, "image/png")
        assert.lengthOf(shot.attempt_log, 1)
        assert.include(shot.attempt_log[0], { number: 1, outcome: "succeeded" })
        const png = yield* api("GET", `/v1/jobs/${shotId}/result`, { key })
        assert.strictEqual(png.status, 200)
        assert.strictEqual(png.headers.get("content-type"), "image/png")
        assert.deepStrictEqual([...png.bytes.slice(0, 8)], PNG_SIGNATURE)
        assert.deepStrictEqual(pngSize(png.bytes), { width: 640, height: 480 })
        assert.strictEqual(png.bytes.length, shot.result_bytes)

        // Its session was an ordinary one: billed, metered, and ended when the job was done.
        const session = yield* waitForSession(
          service.baseUrl,
          key,
          shot.session_id,
          (s) => s.status === "closed"
        )
        assert.strictEqual(session.ended_reason, "client_delete")
        assert.isAbove(session.bytes_down, 0, "the page came through the session's metering proxy")

        const full = yield* waitForJob(
          key,
          yield* submit(key, "screenshot", { url: `${pageUrl}counter`, full_page: true, format: "jpeg" })
        )
        assert.strictEqual(full.state, "succeeded", JSON.stringify(full))
        assert.strictEqual(full.result.height, 3000, "the whole page, not the viewport")
        const jpeg = yield* api("GET", `/v1/jobs/${full.id}/result`, { key })
        assert.strictEqual(jpeg.headers.get("content-type"), "image/jpeg")
        assert.deepStrictEqual([...jpeg.bytes.slice(0, 3)], [0xff, 0xd8, 0xff])

        const pdf = yield* waitForJob(
          key,
          yield* submit(key, "pdf", { url: `${pageUrl}?title=printed`, paper: "a4" })
        )
        assert.strictEqual(pdf.state, "succeeded", JSON.stringify(pdf))
        const pdfBytes = yield* api("GET", `/v1/jobs/${pdf.id}/result`, { key })
        assert.strictEqual(pdfBytes.headers.get("content-type"), "application/pdf")
        assert.strictEqual(new TextDecoder().decode(pdfBytes.bytes.slice(0, 5)), "%PDF-")

        const content = yield* waitForJob(key, yield* submit(key, "content", { url: `${pageUrl}counter` }))
        assert.strictEqual(content.state, "succeeded", JSON.stringify(content))
        assert.include(content.result, { status: 200, title: "counter" })
        assert.include(content.result.text, "press")
        const html = yield* api("GET", `/v1/jobs/${content.id}/result`, { key })
        assert.strictEqual(html.headers.get("content-type"), "text/html; charset=utf-8")
        assert.include(html.text, '<button id="button"')

        // One job.succeeded per job, signed like every delivery, with its result.
        const deadline = Date.now() + 15_000
        while (receiver.received.length < 4 && Date.now() < deadline) yield* Effect.sleep("100 millis")
        const events = receiver.received.map((r) => JSON.parse(r.body))
        assert.deepStrictEqual(
          events.map((e) => e.type),
          ["job.succeeded", "job.succeeded", "job.succeeded", "job.succeeded"]
        )
        const event = events.find((e) => e.data.id === shotId)
        assert.include(event.data, { kind: "screenshot", state: "succeeded", attempts: 1 })
        assert.strictEqual(event.data.result_url, `/v1/jobs/${shotId}/result`)
        assert.isString(receiver.received[0]!.headers["webhook-signature"])

        // Newest first, filtered, in pages.
        const page1 = yield* api("GET", "/v1/jobs?kind=screenshot&limit=1", { key })
        assert.strictEqual(page1.status, 200)
        assert.deepStrictEqual(
          page1.json.data.map((job: any) => job.id),
          [full.id]
        )
        assert.isTrue(page1.json.has_more)
        const page2 = yield* api("GET", `/v1/jobs?kind=screenshot&limit=1&cursor=${page1.json.next_cursor}`, {
          key
        })
        assert.deepStrictEqual(
          page2.json.data.map((job: any) => job.id),
          [shotId]
        )
        assert.isFalse(page2.json.has_more)
        const succeeded = yield* api("GET", "/v1/jobs?state=succeeded", { key })
        assert.lengthOf(succeeded.json.data, 4)
        const bad = yield* api("GET", "/v1/jobs?state=sleeping", { key })
        assert.strictEqual(bad.status, 400)
        const badCursor = yield* api("GET", "/v1/jobs?cursor=nope", { key })
        assert.strictEqual(badCursor.json.error.message, "Invalid value for field: cursor.")
      }),
    240_000
  )

  it.effect(
    "an exec job: its output kept; a failing command fails at once (not retried), and a retry runs it again",
    () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const { key } = yield* signUp(service.baseUrl)
        const ok = yield* waitForJob(key, yield* submit(key, "exec", { command: "echo hello from a job" }))
        assert.strictEqual(ok.state, "succeeded", JSON.stringify(ok))
        assert.include(ok.result, { exit_code: 0, status: "exited", stdout: "hello from a job\n" })
        const stdout = yield* api("GET", `/v1/jobs/${ok.id}/result`, { key })
        assert.strictEqual(stdout.text, "hello from a job\n")

        const failing = yield* submit(key, "exec", { command: "echo broken >&2; exit 4" })
        const failed = yield* waitForJob(key, failing)
        assert.strictEqual(failed.state, "failed")
        assert.strictEqual(failed.attempts, 1, "a command's own failure is not retried")
        assert.strictEqual(failed.error.code, "command_failed")
        assert.include(failed.error.message, "exit code 4")
        assert.include(failed.error.message, "broken")
        assert.isNull(failed.result_url)
        const noResult = yield* api("GET", `/v1/jobs/${failing}/result`, { key })
        assert.strictEqual(noResult.status, 409)
        assert.strictEqual(noResult.json.error.code, "job_conflict")

        const retried = yield* api("POST", `/v1/jobs/${failing}/retry`, { key })
        assert.strictEqual(retried.status, 200, retried.text)
        assert.include(retried.json, { state: "queued", attempt_limit: 4 })
        assert.isNull(retried.json.error)
        const again = yield* waitForJob(key, failing)
        assert.strictEqual(again.state, "failed")
        assert.deepStrictEqual(
          again.attempt_log.map((a: any) => [a.number, a.outcome]),
          [
            [1, "failed"],
            [2, "failed"]
          ]
        )
        const retrySucceeded = yield* api("POST", `/v1/jobs/${ok.id}/retry`, { key })
        assert.strictEqual(retrySucceeded.status, 409)
        assert.strictEqual(
          retrySucceeded.json.error.message,
          "Only a failed or cancelled job can be retried: this one is succeeded."
        )
      }),
    180_000
  )

  it.effect(
    "cancel interrupts a running job on its node and ends its session; a finished job cannot be cancelled",
    () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const { key } = yield* signUp(service.baseUrl)
        const id = yield* submit(key, "exec", { command: "sleep 120" })
        const running = yield* waitForJob(
          key,
          id,
          (job) => job.state === "running" && job.session_id !== null
        )
        yield* waitForSession(service.baseUrl, key, running.session_id, (s) => s.status === "ready")
        const cancelled = yield* api("POST", `/v1/jobs/${id}/cancel`, { key })
        assert.strictEqual(cancelled.status, 200, cancelled.text)
        assert.include(cancelled.json, { state: "cancelled" })
        assert.deepStrictEqual(cancelled.json.error, { code: "cancelled", message: "Cancelled." })
        const session = yield* waitForSession(
          service.baseUrl,
          key,
          running.session_id,
          (s) => s.status === "closed",
          15_000
        )
        assert.strictEqual(session.ended_reason, "client_delete", "the attempt's session ended with it")
        const job = yield* api("GET", `/v1/jobs/${id}`, { key })
        assert.strictEqual(
          job.json.state,
          "cancelled",
          "the interrupted attempt wrote nothing over the cancel"
        )
        assert.include(job.json.attempt_log[0], { outcome: "cancelled" })
        const twice = yield* api("POST", `/v1/jobs/${id}/cancel`, { key })
        assert.strictEqual(twice.status, 409)
        assert.deepStrictEqual(twice.json, {
          error: { code: "job_conflict", message: "The job has already finished: it is cancelled." }
        })

        // A queued one is cancelled before it runs: the account runs at most 4 at once.
        const sleepers = yield* Effect.forEach([1, 2, 3, 4, 5], () =>
          submit(key, "exec", { command: "sleep 120" })
        )
        const queued = yield* api("POST", `/v1/jobs/${sleepers[4]}/cancel`, { key })
        assert.strictEqual(queued.json.state, "cancelled")
        for (const sleeper of sleepers.slice(0, 4)) yield* api("POST", `/v1/jobs/${sleeper}/cancel`, { key })
        const audit = yield* api("GET", "/v1/audit/events?action=job.", { key })
        assert.strictEqual(audit.status, 200, audit.text)
        const actions = audit.json.data.map((event: any) => `${event.action} ${event.outcome}`)
        assert.strictEqual(actions.filter((a: string) => a === "job.created success").length, 6)
        assert.strictEqual(actions.filter((a: string) => a === "job.cancelled success").length, 6)
        assert.strictEqual(actions.filter((a: string) => a === "job.cancelled failure").length, 1, "the 409")
      }),
    120_000
  )
})
