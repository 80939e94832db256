// What a session's log never holds: credentials. Applied where the events are collected, so no
// secret is ever written, listed or exported (docs/guides/session-logs.md lists what is redacted).

export const REDACTED = "[redacted]"
/** The same in a URL, where brackets would be escaped. */
const URL_REDACTED = "redacted"

/** Headers whose values are credentials, lower-cased. */
export const SECRET_HEADERS: ReadonlySet<string> = new Set([
  "authorization",
  "proxy-authorization",
  "cookie",
  "set-cookie",
  "x-api-key",
  "x-auth-token",
  "x-csrf-token",
  "x-xsrf-token"
])

/** Query parameters whose values are credentials (the service's own `token` among them), lower-cased. */
export const SECRET_PARAMS: ReadonlySet<string> = new Set([
  "token",
  "access_token",
  "refresh_token",
  "id_token",
  "api_key",
  "apikey",
  "key",
  "password",
  "secret",
  "client_secret",
  "signature",
  "sig",
  "code"
])

/** The service's API keys (`svc_live_`, `svc_test_` and their secret), wherever they appear in a text. */
const SERVICE_KEY = /svc_(live|test)_[A-Za-z0-9_-]+/g

/** `text` with any of the service's keys in it redacted. */
export const redactText = (text: string) =>
  text.replace(SERVICE_KEY, (_key, mode) => `svc_${mode}_${REDACTED}`)

/** A URL with its user and password, and the values of credential parameters, redacted. */
export const redactUrl = (raw: string) => {
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    return redactText(raw)
  }
  if (url.protocol === "data:" || url.protocol === "blob:") return raw
  if (url.username !== "" || url.password !== "") {
    url.username = URL_REDACTED
    url.password = ""
  }
  let changed = false
  for (const name of [...url.searchParams.keys()])
    if (SECRET_PARAMS.has(name.toLowerCase())) {
      url.searchParams.set(name, URL_REDACTED)
      changed = true
    }
  const text = changed || url.username !== "" ? url.toString() : raw
  return redactText(text)
}

/** Headers as `name: value` pairs (CDP's object form), credentials redacted. */
export const redactHeaders = (headers: Readonly<Record<string, unknown>> | undefined) => {
  const out: Record<string, string> = {}
  for (const [name, value] of Object.entries(headers ?? {}))
    out[name] = SECRET_HEADERS.has(name.toLowerCase()) ? REDACTED : redactText(String(value))
  return out
}
