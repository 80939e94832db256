import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { execFileSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { request, type RequestOptions, signUp } from "../../support/Client.ts"
import * as TestService from "../../support/TestService.ts"

const api = (method: string, path: string, options?: RequestOptions) =>
  Effect.flatMap(TestService.TestService, (service) => request(service.baseUrl, method, path, options))

const tempDir = Effect.acquireRelease(
  Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "rbs-ssh-api-"))),
  (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
)

/** A fresh key pair from ssh-keygen: the `.pub` line and what `ssh-keygen -lf` says of it. */
const keygen = (dir: string, name: string, args: ReadonlyArray<string>) => {
  const path = Path.join(dir, name)
  execFileSync("ssh-keygen", ["-q", ...args, "-N", "", "-C", `${name}@test`, "-f", path])
  const listed = execFileSync("ssh-keygen", ["-lf", `${path}.pub`], { encoding: "utf8" }).trim()
  const [, fingerprint, label] = /^\d+ (SHA256:\S+) .* \(([A-Z0-9]+)\)$/.exec(listed)!
  return {
    publicKey: Fs.readFileSync(`${path}.pub`, "utf8").trim(),
    fingerprint: fingerprint!,
    label: label!
  }
}

layer(TestService.layer({ browserPoolSize: 0 }), { excludeTestServices: true })("SSH keys API", (it) => {
  it.effect("registers keys with ssh-keygen's fingerprint and type, refuses duplicates and bad keys", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const user = yield* Effect.flatMap(TestService.TestService, (s) => signUp(s.baseUrl))
      const cases = [
        { name: "ed", args: ["-t", "ed25519"], type: "ssh-ed25519" },
        { name: "ec", args: ["-t", "ecdsa", "-b", "384"], type: "ecdsa-sha2-nistp384" },
        { name: "rsa", args: ["-t", "rsa", "-b", "2048"], type: "ssh-rsa" }
      ]
      const ids: Array<string> = []
      for (const c of cases) {
        const key = keygen(dir, c.name, c.args)
        const created = yield* api("POST", "/v1/ssh-keys", {
          key: user.key,
          body: { public_key: key.publicKey }
        })
        assert.strictEqual(created.status, 200, created.text)
        const info = created.json.key
        assert.deepInclude(info, {
          key_fingerprint: key.fingerprint,
          key_type: c.type,
          name: `${c.name}@test`,
          public_key: key.publicKey.split(" ").slice(0, 2).join(" "),
          last_used_at: null
        })
        ids.push(info.id)
        // The same key again, even with another comment, is a duplicate.
        const again = yield* api("POST", "/v1/ssh-keys", {
          key: user.key,
          body: { public_key: `${key.publicKey.split(" ").slice(0, 2).join(" ")} other`, name: "again" }
        })
        assert.deepStrictEqual([again.status, again.json.error.code], [409, "ssh_key_exists"])
      }

      const weak = keygen(dir, "weak", ["-t", "rsa", "-b", "1024"])
      for (const public_key of [weak.publicKey, "ssh-ed25519 AAAA", "hello", ""]) {
        const refused = yield* api("POST", "/v1/ssh-keys", { key: user.key, body: { public_key } })
        assert.deepStrictEqual(refused.json, {
          error: { code: "invalid_field", message: "Invalid value for field: public_key." }
        })
      }

      const list = yield* api("GET", "/v1/ssh-keys", { key: user.key })
      assert.deepStrictEqual(
        list.json.keys.map((k: any) => k.id),
        [...ids].reverse()
      )
      // Another account may register the same key; it sees only its own.
      const other = yield* Effect.flatMap(TestService.TestService, (s) => signUp(s.baseUrl))
      const shared = yield* api("POST", "/v1/ssh-keys", {
        key: other.key,
        body: { public_key: keygen(dir, "ed2", ["-t", "ed25519"]).publicKey }
      })
      assert.strictEqual(shared.status, 200)
      const theirs = yield* api("GET", "/v1/ssh-keys", { key: other.key })
      assert.strictEqual(theirs.json.keys.length, 1)

      assert.strictEqual((yield* api("DELETE", `/v1/ssh-keys/${ids[0]}`, { key: user.key })).status, 204)
      const gone = yield* api("DELETE", `/v1/ssh-keys/${ids[0]}`, { key: user.key })
      assert.deepStrictEqual([gone.status, gone.json.error.code], [404, "ssh_key_not_found"])
      assert.strictEqual((yield* api("GET", "/v1/ssh-keys", { key: user.key })).json.keys.length, 2)
    })
  )
})
