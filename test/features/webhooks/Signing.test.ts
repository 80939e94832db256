import { assert, describe, it } from "@effect/vitest"
import { Webhook } from "standardwebhooks"
import * as Signing from "../../../src/features/webhooks/Signing.ts"

describe("webhook signing (Standard Webhooks)", () => {
  const body = JSON.stringify({ id: "evt_1", type: "session.ready", data: { id: "sess_1" } })
  const now = Math.floor(Date.now() / 1000)

  it("signs so the standardwebhooks library verifies, and a changed body fails", () => {
    const secret = Signing.newSecret()
    assert.match(secret, /^whsec_[A-Za-z0-9+/]{32}$/)
    const headers = Signing.headers([secret], "evt_1", now, body)
    assert.deepStrictEqual(new Webhook(secret).verify(body, headers), JSON.parse(body))
    assert.throws(() => new Webhook(secret).verify(body.replace("sess_1", "sess_2"), headers))
    assert.throws(() => new Webhook(Signing.newSecret()).verify(body, headers))
  })

  it("signs with both secrets during a rotation: a receiver holding either verifies", () => {
    const [old, fresh] = [Signing.newSecret(), Signing.newSecret()]
    const headers = Signing.headers([fresh, old], "evt_2", now, body)
    assert.lengthOf(headers["webhook-signature"].split(" "), 2)
    for (const secret of [old, fresh]) assert.isOk(new Webhook(secret).verify(body, headers))
  })

  it("shows only a preview of a secret", () => {
    const secret = Signing.newSecret()
    assert.strictEqual(Signing.preview(secret), `${secret.slice(0, 10)}...`)
  })

  it("waits as the documented schedule says, with +-10% jitter after the first attempt", () => {
    const minutes = (ms: number) => ms / 60_000
    assert.strictEqual(
      Signing.retryDelay(1, () => 1),
      0
    )
    assert.strictEqual(
      Signing.retryDelay(2, () => 0.5),
      5_000
    )
    assert.strictEqual(
      Signing.retryDelay(3, () => 0),
      4.5 * 60_000
    )
    assert.strictEqual(minutes(Signing.retryDelay(4, () => 1)!), 33)
    assert.strictEqual(
      Signing.retryDelay(8, () => 0.5),
      10 * 3_600_000
    )
    assert.isUndefined(Signing.retryDelay(9))
  })
})
