import * as Crypto from "node:crypto"

// Secrets kept at rest (webhook signing secrets, an assistant's vault), sealed
// under a key derived from the service's secrets key (\`Secrets\`).

/** AES-256-GCM under `key` (32 bytes): `v1:` + base64 of iv, tag and ciphertext. */
export const encrypt = (key: Uint8Array, plaintext: string) => {
  const iv = Crypto.randomBytes(12)
  const cipher = Crypto.createCipheriv("aes-256-gcm", key, iv)
  const body = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()])
  return `v1:${Buffer.concat([iv, cipher.getAuthTag(), body]).toString("base64")}`
}

/** The inverse of `encrypt`; throws when the key is wrong or the text was altered. */
export const decrypt = (key: Uint8Array, sealed: string) => {
  if (!sealed.startsWith("v1:")) throw new Error("unknown secret encoding")
  const bytes = Buffer.from(sealed.slice(3), "base64")
  const decipher = Crypto.createDecipheriv("aes-256-gcm", key, bytes.subarray(0, 12))
  decipher.setAuthTag(bytes.subarray(12, 28))
  return Buffer.concat([decipher.update(bytes.subarray(28)), decipher.final()]).toString("utf8")
}
