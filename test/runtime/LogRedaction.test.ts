import { assert, describe, it } from "@effect/vitest"
import { redactHeaders, redactText, redactUrl } from "../../src/runtime/LogRedaction.ts"

describe("a session log's redaction", () => {
  it("credential headers are redacted whatever their case; others are kept", () => {
    assert.deepStrictEqual(
      redactHeaders({
        Authorization: "Bearer abc",
        cookie: "sid=1",
        "Set-Cookie": "sid=2; Path=/",
        "Proxy-Authorization": "Basic eA==",
        "X-Api-Key": "k",
        Accept: "text/html"
      }),
      {
        Authorization: "[redacted]",
        cookie: "[redacted]",
        "Set-Cookie": "[redacted]",
        "Proxy-Authorization": "[redacted]",
        "X-Api-Key": "[redacted]",
        Accept: "text/html"
      }
    )
  })

  it("a URL's user, password and credential parameters are redacted, the rest kept as written", () => {
    assert.strictEqual(
      redactUrl("https://user:pw@example.com/a?token=t1&q=cats&API_KEY=k"),
      "https://redacted@example.com/a?token=redacted&q=cats&API_KEY=redacted"
    )
    assert.strictEqual(redactUrl("https://example.com/a?q=cats"), "https://example.com/a?q=cats")
    assert.strictEqual(redactUrl("not a url svc_live_abcDEF123"), "not a url svc_live_[redacted]")
  })

  it("the service's own keys are redacted in any text", () => {
    assert.strictEqual(redactText("key svc_test_Zz09_- here"), "key svc_test_[redacted] here")
  })
})
