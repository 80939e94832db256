import { assert, it as plain, layer } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import * as Http from "node:http"
import type * as Net from "node:net"
import puppeteer from "puppeteer-core"
import { makeServiceConfig } from "../../../src/platform/config/Config.ts"
import { isReady, request, signUp, waitForSession } from "../../support/Client.ts"
import * as LocalPage from "../../support/LocalPage.ts"
import * as TestService from "../../support/TestService.ts"
import * as WebhookReceiver from "../../support/WebhookReceiver.ts"

interface Span {
  readonly name: string
  readonly kind: number
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId?: string
  readonly attributes: Record<string, unknown>
}

/**
 * A local OTLP/HTTP collector: what the service exports to `/v1/traces`, as
 * the JSON it sent (kept whole, to look for secrets) and as flat spans.
 */
const collector = await new Promise<{
  readonly url: string
  readonly bodies: Array<string>
  readonly headers: Array<Http.IncomingHttpHeaders>
  readonly spans: () => Array<Span>
  readonly server: Http.Server
}>((resolve) => {
  const bodies: Array<string> = []
  const headers: Array<Http.IncomingHttpHeaders> = []
  const server = Http.createServer((req, res) => {
    const parts: Array<Buffer> = []
    req.on("data", (part) => parts.push(part))
    req.on("end", () => {
      if (req.method === "POST" && req.url === "/v1/traces") {
        bodies.push(Buffer.concat(parts).toString("utf8"))
        headers.push(req.headers)
      }
      res.writeHead(200, { "content-type": "application/json" })
      res.end("{}")
    })
  })
  const valueOf = (value: any): unknown =>
    value.stringValue ??
    (value.intValue === undefined ? undefined : Number(value.intValue)) ??
    value.boolValue
  const spans = () =>
    bodies.flatMap((body) =>
      (JSON.parse(body).resourceSpans as Array<any>).flatMap((resource) =>
        (resource.scopeSpans as Array<any>).flatMap((scope) =>
          (scope.spans as Array<any>).map((span): Span => ({
            ...span,
            attributes: Object.fromEntries(
              (span.attributes as Array<any>).map((entry) => [entry.key, valueOf(entry.value)])
            )
          }))
        )
      )
    )
  server.listen(0, "127.0.0.1", () =>
    resolve({
      url: `http://127.0.0.1:${(server.address() as Net.AddressInfo).port}`,
      bodies,
      headers,
      spans,
      server
    })
  )
})

plain("OTLP export is off unless OTEL_EXPORTER_OTLP_ENDPOINT is set; traces go to its /v1/traces", () => {
  assert.isUndefined(makeServiceConfig({}).otel)
  assert.isUndefined(makeServiceConfig({ otelEndpoint: "" }).otel)
  const on = makeServiceConfig({ otelEndpoint: "http://collector:4318/", otelHeaders: "x-key=a%3Db,y=2" })
  assert.strictEqual(on.otel?.tracesUrl, "http://collector:4318/v1/traces")
  assert.strictEqual(on.otel?.serviceName, "remote-browser-service")
  assert.deepStrictEqual(Redacted.value(on.otel!.headers), { "x-key": "a=b", y: "2" })
  assert.notInclude(String(on.otel!.headers), "a=b", "the collector's headers are redacted in the config")
})

layer(
  TestService.layer({
    browserPoolSize: 1,
    webhookAllowCidrs: "127.0.0.1/32",
    otelEndpoint: collector.url,
    otelServiceName: "rbs-under-test",
    otelHeaders: "x-collector-key=collector-secret"
  }),
  { excludeTestServices: true }
)("OpenTelemetry traces", (it) => {
  it.effect(
    "a session's life is exported to a local collector: the request, each phase, the relay's connect, the teardown and the webhook attempts, each with the session and its account, and no credential anywhere",
    () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const account = yield* signUp(service.baseUrl)
        const key = account.key
        const receiver = yield* WebhookReceiver.serve
        const hook = yield* request(service.baseUrl, "POST", "/v1/webhooks", {
          key,
          body: { url: receiver.url, events: ["session.created", "session.closed"] }
        })
        assert.strictEqual(hook.status, 201, hook.text)
        const created = yield* request(service.baseUrl, "POST", "/v1/sessions", { key, body: {} })
        assert.strictEqual(created.status, 201, created.text)
        const id = created.json.id as string
        const ready = yield* waitForSession(service.baseUrl, key, id, isReady)
        const page = yield* LocalPage.serve
        // The key in the URL, as a client that cannot set headers sends it.
        const browser = yield* Effect.promise(() =>
          puppeteer.connect({ browserWSEndpoint: `${ready.cdp_url}?token=${key}` })
        )
        const tab = yield* Effect.promise(() => browser.newPage())
        yield* Effect.promise(() => tab.goto(page))
        yield* Effect.promise(() => browser.disconnect())
        assert.strictEqual(
          (yield* request(service.baseUrl, "DELETE", `/v1/sessions/${id}`, { key })).status,
          204
        )

        const ofSession = (name: string) =>
          collector.spans().filter((span) => span.name === name && span.attributes["rbs.session.id"] === id)
        const wanted = [
          "session.placement",
          "session.start",
          "session.acquire",
          "session.ready",
          "session.connect",
          "session.end",
          "session.teardown",
          "webhook.attempt"
        ]
        const deadline = Date.now() + 20_000
        while (
          wanted.some((name) => ofSession(name).length === 0) ||
          ofSession("webhook.attempt").length < 2
        ) {
          if (Date.now() > deadline) {
            return assert.fail(
              `missing ${wanted.filter((name) => ofSession(name).length === 0)} in ${[...new Set(collector.spans().map((s) => s.name))]}`
            )
          }
          yield* Effect.sleep("200 millis")
        }
        const accountId = ofSession("session.start")[0]!.attributes["rbs.account.id"]
        assert.isString(accountId)
        for (const name of wanted) {
          assert.isTrue(
            ofSession(name).every((span) => span.attributes["rbs.account.id"] === accountId),
            `${name} carries the account`
          )
        }
        // Admission: the account's, and the session it admitted.
        const admission = collector
          .spans()
          .find((span) => span.name === "session.admission" && span.attributes["rbs.session.id"] === id)
        assert.isDefined(admission, "session.admission")
        assert.strictEqual(admission!.attributes["rbs.account.id"], accountId)
        assert.strictEqual(ofSession("session.connect")[0]!.attributes["rbs.connection.kind"], "cdp")
        assert.deepStrictEqual(
          ofSession("webhook.attempt")
            .map((span) => [
              span.attributes["rbs.webhook.event_type"],
              span.attributes["http.response.status_code"]
            ])
            .sort(),
          [
            ["session.closed", 200],
            ["session.created", 200]
          ]
        )
        assert.strictEqual(ofSession("session.end")[0]!.attributes["rbs.ended_reason"], "client_delete")
        // The requests: server spans, the create under it its admission; the session's routes say which.
        const servers = collector.spans().filter((span) => span.kind === 2)
        const createRequest = servers.find(
          (span) =>
            span.attributes["http.request.method"] === "POST" &&
            span.attributes["url.path"] === "/v1/sessions"
        )
        assert.isDefined(createRequest, "the create request's span")
        assert.strictEqual(createRequest!.attributes["rbs.account.id"], accountId)
        assert.strictEqual(admission!.traceId, createRequest!.traceId, "the admission is part of the request")
        const deleteRequest = servers.find(
          (span) =>
            span.attributes["http.request.method"] === "DELETE" && span.attributes["rbs.session.id"] === id
        )
        assert.isDefined(deleteRequest, "the delete request's span names the session")
        const relay = servers.find((span) =>
          String(span.attributes["url.path"]).startsWith(`/sessions/${id}`)
        )
        assert.isDefined(relay, "the CDP upgrade's span")
        assert.strictEqual(relay!.attributes["rbs.session.id"], id)
        assert.strictEqual(
          relay!.attributes["url.query"],
          "token=REDACTED",
          "the key in the query is not exported"
        )

        // No credential: not the key (it was in the CDP URL's query), not the cookie, not the collector's.
        const exported = collector.bodies.join("\n")
        assert.notInclude(exported, key)
        assert.notInclude(exported, key.slice(10))
        assert.notInclude(exported, account.cookie.split("=")[1]!)
        assert.include(exported, "rbs-under-test")
        assert.strictEqual(
          collector.headers[0]!["x-collector-key"],
          "collector-secret",
          "the collector's headers"
        )
      })
  )
})
