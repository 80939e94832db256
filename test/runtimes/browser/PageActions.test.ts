import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SessionActors } from "../../../src/features/sessions/SessionActors.ts"
import { openSession, signUp } from "../../support/Client.ts"
import * as TestService from "../../support/TestService.ts"

// What the service itself does to a session's page (the MCP tools' actions) is checked where it runs,
// in the session's actor: a message that reaches the actor by any way but the edge (another node,
// the library) still sends no page anywhere but http, https or about:blank.

layer(TestService.layer(), { excludeTestServices: true })("the service's own page actions", (it) => {
  it.effect("a Navigate to another scheme is refused by the actor, the page left where it was", () =>
    Effect.gen(function* () {
      const service = yield* TestService.TestService
      const account = yield* signUp(service.baseUrl)
      const session = yield* openSession(service.baseUrl, account.key)
      const actors = yield* SessionActors
      const address = { id: session.id as string, nodeId: "local" }
      for (const url of [
        "file:///etc/hostname",
        "chrome://version",
        " FILE:/etc/passwd",
        "javascript:alert(1)"
      ]) {
        const refused = yield* Effect.flip(actors.drive(address, { _tag: "Navigate", url, waitMs: 0 }))
        assert.strictEqual(refused._tag, "PageActionFailed", `${url}: ${String(refused)}`)
        assert.match(String((refused as { detail?: string }).detail), /only http, https or about:blank/, url)
      }
      const text = (yield* actors.drive(address, { _tag: "Text" })) as { url: string }
      assert.strictEqual(text.url, "about:blank", "the page never left")
      const blank = (yield* actors.drive(address, { _tag: "Navigate", url: "about:blank", waitMs: 0 })) as {
        url: string
      }
      assert.strictEqual(blank.url, "about:blank")
    }).pipe(Effect.scoped)
  )
})
