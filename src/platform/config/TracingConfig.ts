import { Redacted } from "effect"
import type { ServiceConfigInput } from "./ConfigInput.ts"

/** Where spans are exported (OTLP/HTTP). */
export interface TracingConfig {
  readonly tracesUrl: string
  readonly serviceName: string
  readonly headers: Redacted.Redacted<Record<string, string>>
}

/** `name=value,name=value` (values percent-decoded, as OpenTelemetry's variables are written). */
const otlpHeaders = (input: string | Redacted.Redacted<string> | undefined): Record<string, string> => {
  const text = input === undefined ? "" : typeof input === "string" ? input : Redacted.value(input)
  const headers: Record<string, string> = {}
  for (const pair of text.split(",")) {
    const at = pair.indexOf("=")
    if (at <= 0) continue
    headers[pair.slice(0, at).trim()] = decodeURIComponent(pair.slice(at + 1).trim())
  }
  return headers
}

/** From `OTEL_EXPORTER_OTLP_ENDPOINT` and its companions; `undefined` (no export) when it is unset. */
export const makeTracingConfig = (input: ServiceConfigInput): TracingConfig | undefined =>
  input.otelEndpoint === undefined || input.otelEndpoint === ""
    ? undefined
    : {
        tracesUrl: `${input.otelEndpoint.replace(/\/+$/, "")}/v1/traces`,
        serviceName: input.otelServiceName ?? "remote-browser-service",
        headers: Redacted.make(otlpHeaders(input.otelHeaders))
      }
