import { Result } from "effect"
import * as Crypto from "node:crypto"
import sshpk from "sshpk"

/** An OpenSSH public key a user may register, in the form we store and compare. */
export interface SshPublicKey {
  /** The type named inside the key, e.g. `ssh-ed25519`, `ecdsa-sha2-nistp256`, `ssh-rsa`. */
  readonly keyType: string
  /** As `ssh-keygen -lf` prints it: `SHA256:` and unpadded base64. */
  readonly fingerprint: string
  /** `<type> <base64>` without the comment: the canonical form, for duplicate detection. */
  readonly publicKey: string
  readonly comment: string | null
  readonly bits: number
}

const MAX_INPUT_LENGTH = 16 * 1024
const SUPPORTED_TYPES: ReadonlySet<string> = new Set([
  "ssh-ed25519",
  "ecdsa-sha2-nistp256",
  "ecdsa-sha2-nistp384",
  "ecdsa-sha2-nistp521",
  "ssh-rsa"
])
const MIN_RSA_BITS = 2048
// OpenSSH itself refuses larger moduli.
const MAX_RSA_BITS = 16384

const NOT_OPENSSH = "not an OpenSSH public key"
const CORRUPTED = "the key data is truncated or corrupted"

const looksLikeKeyType = (word: string) => /^(ssh|ecdsa|sk|rsa)-/.test(word)

// Reasons never quote the input: it may be a private key pasted by mistake.
const refusedType = (typeWord: string, words: ReadonlyArray<string>): string => {
  if (typeWord === "ssh-dss") return "DSA keys are not accepted"
  if (typeWord.startsWith("sk-")) return "security-key (sk-) keys are not supported"
  if (words.slice(1).some(looksLikeKeyType)) return "authorized_keys options are not accepted"
  if (looksLikeKeyType(typeWord)) {
    return "unsupported key type (use ssh-ed25519, ecdsa-sha2-nistp* or ssh-rsa)"
  }
  return NOT_OPENSSH
}

/** The algorithm name a key blob starts with (an SSH string: uint32 length, then bytes). */
const blobType = (blob: Buffer) => blob.subarray(4, 4 + blob.readUInt32BE(0)).toString("latin1")

/**
 * Parses one line in OpenSSH's public-key format, `<type> <base64> [comment]`,
 * accepting Ed25519, ECDSA and RSA of at least 2048 bits. Fails with a short
 * reason meant for the user.
 */
export const parseSshPublicKey = (input: string): Result.Result<SshPublicKey, string> =>
  Result.gen(function* () {
    if (input.length > MAX_INPUT_LENGTH) return yield* Result.fail("SSH public key is too long")
    const text = input.trim()
    if (text === "") return yield* Result.fail("SSH public key is empty")
    if (/BEGIN [A-Z0-9 ]*PRIVATE KEY|PuTTY-User-Key-File/.test(text)) {
      return yield* Result.fail("this is a private key: send the public key (the .pub file)")
    }
    if (/[\r\n]/.test(text)) return yield* Result.fail("expected exactly one key on one line")
    const line = /^(\S+)[ \t]+(\S+)(?:[ \t]+(.*))?$/.exec(text)
    if (line === null || /[\u0000-\u0008\u000b-\u001f\u007f]/.test(text)) {
      return yield* Result.fail(NOT_OPENSSH)
    }
    const [, typeWord, data, comment] = line
    if (!SUPPORTED_TYPES.has(typeWord)) return yield* Result.fail(refusedType(typeWord, text.split(/\s+/)))

    // Buffer.from skips characters it cannot decode; encoding back catches them,
    // as well as missing padding and non-zero trailing bits.
    const blob = Buffer.from(data, "base64")
    if (!/^[A-Za-z0-9+/]+={0,2}$/.test(data) || blob.toString("base64") !== data) {
      return yield* Result.fail("the key data is not valid base64")
    }
    const key = yield* Result.try({ try: () => sshpk.parseKey(blob, "rfc4253"), catch: () => CORRUPTED })
    // sshpk reads extra fields as a private key and pads short integers; only
    // the exact canonical encoding is accepted, since the fingerprint is over
    // these bytes.
    if (!key.toBuffer("rfc4253").equals(blob)) return yield* Result.fail(CORRUPTED)
    const keyType = blobType(blob)
    if (keyType !== typeWord) return yield* Result.fail("the key type does not match the key data")
    if (key.type === "rsa" && key.size < MIN_RSA_BITS) {
      return yield* Result.fail(`RSA keys need at least ${MIN_RSA_BITS} bits`)
    }
    if (key.type === "rsa" && key.size > MAX_RSA_BITS) {
      return yield* Result.fail(`RSA keys may have at most ${MAX_RSA_BITS} bits`)
    }
    // sshpk does not check that an ECDSA point lies on its curve; OpenSSL does
    // (as OpenSSH does when it loads the key).
    yield* Result.try({ try: () => Crypto.createPublicKey(key.toString("pkcs8")), catch: () => CORRUPTED })

    const digest = Crypto.createHash("sha256").update(blob).digest("base64").replace(/=+$/, "")
    return {
      keyType,
      fingerprint: `SHA256:${digest}`,
      publicKey: `${keyType} ${data}`,
      comment: comment ?? null,
      bits: key.size
    }
  })
