import { assert, describe, it } from "@effect/vitest"
import * as Crypto from "node:crypto"
import * as Sealed from "../../../src/platform/crypto/Sealed.ts"

describe("secrets sealed at rest", () => {
  it("keeps secrets encrypted at rest: the key opens them, another key or a changed byte does not", () => {
    const key = Crypto.randomBytes(32)
    const secret = `whsec_${Crypto.randomBytes(24).toString("base64")}`
    const sealed = Sealed.encrypt(key, secret)
    assert.notInclude(sealed, secret.slice(6))
    assert.strictEqual(Sealed.decrypt(key, sealed), secret)
    assert.throws(() => Sealed.decrypt(Crypto.randomBytes(32), sealed))
    const bytes = Buffer.from(sealed.slice(3), "base64")
    bytes[bytes.length - 1] ^= 1
    assert.throws(() => Sealed.decrypt(key, `v1:${bytes.toString("base64")}`))
  })
})
