import { Effect, Layer, Redacted } from "effect"
import { FetchHttpClient, UrlParams } from "effect/http"
import { OtlpSerialization, OtlpTracer } from "effect/observability"
import { NodeConfig, OtelConfig } from "../config/Config.ts"

/** The attributes that say whose and which session a span is about. */
export const SESSION_ID = "rbs.session.id"
export const ACCOUNT_ID = "rbs.account.id"

/** A session's (and, when known, its account's) span attributes. */
export const sessionAttributes = (sessionId: string, accountId?: string | undefined) =>
  accountId === undefined ? { [SESSION_ID]: sessionId } : { [SESSION_ID]: sessionId, [ACCOUNT_ID]: accountId }

/**
 * Query parameters that carry credentials (an API key or access token in
 * `?token=`, a preview token, a gateway link): never put in a span's URL.
 */
const SECRET_PARAMS = [
  "token",
  "rbs_token",
  "X-Amz-Signature",
  "X-Amz-Credential",
  "X-Amz-Security-Token",
  "sig"
]

/**
 * Spans exported over OTLP (HTTP, JSON) when `OTEL_EXPORTER_OTLP_ENDPOINT`
 * is set, with Effect's own exporter; nothing at all when it is not. Every
 * request is a server span (Effect's HTTP middleware); the session's phases,
 * webhook attempts and the relay's connects are spans of their own, carrying
 * `rbs.session.id` and `rbs.account.id`. Credentials never go in a span: no
 * headers are recorded, and the query parameters that carry tokens are
 * redacted.
 */
export const layer = Layer.unwrap(
  Effect.map(Effect.all([Effect.service(NodeConfig), Effect.service(OtelConfig)]), ([node, otelConfig]) => {
    const config = { ...node, ...otelConfig }
    const redacted = Layer.succeed(UrlParams.CurrentRedactedNames, SECRET_PARAMS)
    const otel = config.otel
    if (otel === undefined) return redacted
    return OtlpTracer.layer({
      url: otel.tracesUrl,
      resource: {
        serviceName: otel.serviceName,
        attributes: { "service.instance.id": config.nodeId }
      },
      headers: Redacted.value(otel.headers),
      exportInterval: "1 second"
    }).pipe(
      Layer.provide([OtlpSerialization.layerJson, FetchHttpClient.layer]),
      Layer.merge(redacted),
      Layer.tap(() =>
        Effect.logInfo("tracing.otlp", { to: new URL(otel.tracesUrl).origin, serviceName: otel.serviceName })
      )
    )
  })
)
