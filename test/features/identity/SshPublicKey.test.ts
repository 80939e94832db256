import { assert, describe, it } from "@effect/vitest"
import { Effect, Result } from "effect"
import { execFileSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { parseSshPublicKey, type SshPublicKey } from "../../../src/features/identity/SshPublicKey.ts"

const tempDir = Effect.acquireRelease(
  Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "rbs-ssh-"))),
  (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
)

interface Generated {
  readonly path: string
  /** The `.pub` file as written, trailing newline included. */
  readonly publicFile: string
  readonly privateFile: string
  readonly type: string
  readonly base64: string
  readonly blob: Buffer
}

const keygen = (
  dir: string,
  name: string,
  args: ReadonlyArray<string>,
  comment = "alice@laptop"
): Generated => {
  const path = Path.join(dir, name)
  execFileSync("ssh-keygen", ["-q", ...args, "-N", "", "-C", comment, "-f", path])
  const publicFile = Fs.readFileSync(`${path}.pub`, "utf8")
  const [type = "", base64 = ""] = publicFile.split(" ")
  return {
    path,
    publicFile,
    privateFile: Fs.readFileSync(path, "utf8"),
    type,
    base64,
    blob: Buffer.from(base64, "base64")
  }
}

/** What `ssh-keygen -lf` prints: `<bits> SHA256:... <comment> (<TYPE>)`. */
const listed = (publicPath: string) => {
  const line = execFileSync("ssh-keygen", ["-lf", publicPath], { encoding: "utf8" }).trim()
  const match = /^(\d+) (SHA256:\S+) (.*) \(([A-Z0-9]+)\)$/.exec(line)
  if (match === null) return assert.fail(`unexpected ssh-keygen -lf output: ${line}`)
  const [, bits, fingerprint, comment, label] = match
  return { bits: Number(bits), fingerprint, comment, label }
}

const accept = (input: string): SshPublicKey =>
  Result.getOrThrowWith(parseSshPublicKey(input), (reason) => new Error(`refused: ${reason}`))

const refusal = (input: string, name = "input"): string =>
  Result.match(parseSshPublicKey(input), {
    onFailure: (reason) => reason,
    onSuccess: (key) => assert.fail(`${name}: accepted as ${key.keyType}`)
  })

const sshString = (value: string | Buffer) => {
  const bytes = Buffer.from(value)
  const length = Buffer.alloc(4)
  length.writeUInt32BE(bytes.length)
  return Buffer.concat([length, bytes])
}

// Generated with `ssh-keygen -t dsa` (OpenSSH 9.2): OpenSSH 10 can no longer make one.
const DSA_KEY =
  "ssh-dss AAAAB3NzaC1kc3MAAACBAMuBmTswF45B/MX+gQiKHaQqVGRJ2ikwJbkNzWVvNL50g8jXGuTsaAJkmMjKJ+B/Opl8BIEyNtw09Oaq7d0C4PL7eileA+ZPgGnMNrEnSxfDxHCc/EAIKkUkJnvwUVNKoUPED/FyJryo+JUie8aKNHmtjO1oAgNmtwzQ/qd4xq7NAAAAFQCaNeal/Lh1r2VIZZBj0a4VZ1ziCwAAAIAsab2Ziaz6hQZTYkBMKDO3yd+M2g7UHzU8UxlwIF4aJgBVmXg8mZ4HdH97PbQUjvcwp4PePmL3fdtKVxmldVoezrB6zwK4sybpvtOqiJn36ZIxiz3LymlZ66HTK+piL92s07tC9HCFpCTXAD518vJSJqxJDf/mV13oxQLUCM1oDAAAAIEAsTZO2tSpqzVAcOHgY8pW0nYwBapRZtW15scilU1y1jNVdLwe7yvRNE9VZhpOn6S9F6CQCyFXetqbouj3uAi62C/whyWuATwzbeGK7nIBopX2P/d6EShM/MiwJ7yunEwaVUPO90QDX3aGLALeaGshz+wGgLpy4VbD5jTq8UNch4s= root@vm"

const CORRUPTED = "the key data is truncated or corrupted"
const NOT_OPENSSH = "not an OpenSSH public key"

describe("SshPublicKey", () => {
  it.effect("accepts Ed25519, ECDSA and RSA >= 2048 keys and agrees with ssh-keygen -lf", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const cases = [
        { name: "ed25519", args: ["-t", "ed25519"], comment: "alice@laptop" },
        { name: "ecdsa256", args: ["-t", "ecdsa", "-b", "256"], comment: "work key 2024" },
        { name: "ecdsa384", args: ["-t", "ecdsa", "-b", "384"], comment: "" },
        { name: "ecdsa521", args: ["-t", "ecdsa", "-b", "521"], comment: "ci" },
        { name: "rsa2048", args: ["-t", "rsa", "-b", "2048"], comment: "old laptop" },
        { name: "rsa3072", args: ["-t", "rsa", "-b", "3072"], comment: "bob@desk" }
      ]
      for (const { name, args, comment } of cases) {
        const generated = keygen(dir, name, args, comment)
        const expected = listed(`${generated.path}.pub`)
        const key = accept(generated.publicFile)
        const typeOfLabel: Record<string, string> = {
          ED25519: "ssh-ed25519",
          ECDSA: `ecdsa-sha2-nistp${expected.bits}`,
          RSA: "ssh-rsa"
        }
        assert.strictEqual(key.keyType, typeOfLabel[expected.label], name)
        assert.strictEqual(key.keyType, generated.type, name)
        assert.strictEqual(key.fingerprint, expected.fingerprint, name)
        assert.strictEqual(key.bits, expected.bits, name)
        assert.strictEqual(key.publicKey, `${generated.type} ${generated.base64}`, name)
        assert.strictEqual(key.comment, comment === "" ? null : comment, name)
        assert.strictEqual(expected.comment, comment === "" ? "no comment" : comment, name)
      }
    })
  )

  it.effect("normalizes whitespace and drops the comment, so one key always compares equal", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const { type, base64, publicFile } = keygen(dir, "ed25519", ["-t", "ed25519"])
      const reference = accept(publicFile)
      for (const variant of [
        `${type} ${base64}`,
        `  \t${type}\t${base64}   another comment \r\n`,
        `\n${type}  ${base64} alice@laptop\n`
      ]) {
        const key = accept(variant)
        assert.strictEqual(key.publicKey, reference.publicKey, JSON.stringify(variant))
        assert.strictEqual(key.fingerprint, reference.fingerprint, JSON.stringify(variant))
      }
      assert.isNull(accept(`${type} ${base64}`).comment)
      assert.strictEqual(accept(`${type} ${base64}  another  comment `).comment, "another  comment")
    })
  )

  it.effect("refuses weak and unsupported key types", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const rsa1024 = keygen(dir, "rsa1024", ["-t", "rsa", "-b", "1024"])
      assert.strictEqual(listed(`${rsa1024.path}.pub`).bits, 1024)
      assert.strictEqual(refusal(rsa1024.publicFile), "RSA keys need at least 2048 bits")
      assert.strictEqual(refusal(DSA_KEY), "DSA keys are not accepted")
      // Too slow to generate: a modulus of 2049 bytes, top bit set (16392 bits).
      const hugeModulus = Buffer.concat([Buffer.from([0, 0x80]), Buffer.alloc(2048, 0x11)])
      const hugeRsa = Buffer.concat([
        sshString("ssh-rsa"),
        sshString(Buffer.from([1, 0, 1])),
        sshString(hugeModulus)
      ])
      assert.strictEqual(
        refusal(`ssh-rsa ${hugeRsa.toString("base64")}`),
        "RSA keys may have at most 16384 bits"
      )

      const skBlob = Buffer.concat([
        sshString("sk-ssh-ed25519@openssh.com"),
        sshString(Buffer.alloc(32, 7)),
        sshString("ssh:")
      ])
      assert.strictEqual(
        refusal(`sk-ssh-ed25519@openssh.com ${skBlob.toString("base64")} yubikey`),
        "security-key (sk-) keys are not supported"
      )
      const unsupported = "unsupported key type (use ssh-ed25519, ecdsa-sha2-nistp* or ssh-rsa)"
      const ed = keygen(dir, "ed25519", ["-t", "ed25519"])
      assert.strictEqual(refusal(`ssh-ed25519-cert-v01@openssh.com ${ed.base64}`), unsupported)
      assert.strictEqual(refusal(`ssh-foo ${ed.base64}`), unsupported)
    })
  )

  it.effect("refuses anything but exactly one well-formed OpenSSH public key, without echoing it", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const ed = keygen(dir, "ed25519", ["-t", "ed25519"])
      const ec384 = keygen(dir, "ecdsa384", ["-t", "ecdsa", "-b", "384", "-m", "PKCS8"])
      const pkcs8Public = execFileSync("ssh-keygen", ["-e", "-m", "PKCS8", "-f", `${ec384.path}.pub`], {
        encoding: "utf8"
      })
      const rfc4716Public = execFileSync("ssh-keygen", ["-e", "-f", `${ed.path}.pub`], { encoding: "utf8" })

      const offCurve = Buffer.from(ec384.blob)
      offCurve[offCurve.length - 3] ^= 0x55
      const offCurvePath = Path.join(dir, "off-curve.pub")
      Fs.writeFileSync(offCurvePath, `${ec384.type} ${offCurve.toString("base64")}\n`)
      // OpenSSH refuses that key too.
      assert.throws(() => execFileSync("ssh-keygen", ["-lf", offCurvePath], { stdio: "ignore" }))

      const withBlob = (blob: Buffer) => `${ed.type} ${blob.toString("base64")} alice@laptop`
      const private_ = "this is a private key: send the public key (the .pub file)"
      const cases: ReadonlyArray<readonly [string, string, string]> = [
        ["empty", "", "SSH public key is empty"],
        ["blank", " \n\t ", "SSH public key is empty"],
        ["one word", "hello", NOT_OPENSSH],
        ["garbage", "hello world, this is not a key", NOT_OPENSSH],
        ["type without data", "ssh-ed25519", NOT_OPENSSH],
        ["NUL byte", `${ed.type} ${ed.base64} a\u0000b`, NOT_OPENSSH],
        ["too long", `${ed.type} ${ed.base64} ${"x".repeat(17_000)}`, "SSH public key is too long"],
        ["OpenSSH private key", ed.privateFile, private_],
        ["PKCS8 private key", ec384.privateFile, private_],
        ["private key header alone", "-----BEGIN OPENSSH PRIVATE KEY-----", private_],
        ["PKCS8 public key", pkcs8Public, "expected exactly one key on one line"],
        ["RFC 4716 public key", rfc4716Public, "expected exactly one key on one line"],
        ["two keys", `${ed.publicFile}${ec384.publicFile}`, "expected exactly one key on one line"],
        [
          "options prefix",
          `no-pty,command="echo hi" ${ed.publicFile}`,
          "authorized_keys options are not accepted"
        ],
        ["from= option", `from="10.0.0.0/8" ${ed.publicFile}`, "authorized_keys options are not accepted"],
        ["RSA type word, Ed25519 data", `ssh-rsa ${ed.base64}`, "the key type does not match the key data"],
        [
          "nistp256 type word, nistp384 data",
          `ecdsa-sha2-nistp256 ${ec384.base64}`,
          "the key type does not match the key data"
        ],
        [
          "invalid base64 character",
          `${ed.type} ${ed.base64.slice(0, 30)}*${ed.base64.slice(31)}`,
          "the key data is not valid base64"
        ],
        [
          "base64 cut mid-quantum",
          `${ed.type} ${ed.base64.slice(0, -1)}`,
          "the key data is not valid base64"
        ],
        ["truncated blob", `${ed.type} ${ed.base64.slice(0, -4)}`, CORRUPTED],
        ["trailing field in blob", withBlob(Buffer.concat([ed.blob, sshString("x")])), CORRUPTED],
        ["trailing byte in blob", withBlob(Buffer.concat([ed.blob, Buffer.from([0])])), CORRUPTED],
        ["ECDSA point off the curve", `${ec384.type} ${offCurve.toString("base64")}`, CORRUPTED]
      ]
      for (const [name, input, reason] of cases) assert.strictEqual(refusal(input, name), reason, name)
    })
  )
})
