import { Context, Effect, Layer, Option, Redacted, Schema } from "effect"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import { NodeConfig, SecretsConfig } from "../config/Config.ts"

const SecretsFile = Schema.fromJsonString(
  Schema.Struct({
    previewTokenKey: Schema.String.check(Schema.isMinLength(43))
  })
)
type SecretsFile = typeof SecretsFile.Type

export class SecretsFileError extends Schema.TaggedError<SecretsFileError>()("SecretsFileError", {
  message: Schema.String
}) {}

/**
 * Keys the service signs with. With `SECRETS_KEY` set they derive from it, so
 * every node given the same key verifies what another signed (required with
 * `RUNNER_ADDRESS`). Otherwise they are generated at first start into
 * `DATA_DIR/secrets.json` (mode 0600), so tokens survive a restart.
 */
export class Secrets extends Context.Service<
  Secrets,
  {
    readonly previewTokenKey: Redacted.Redacted<Buffer>
    /** Signs access tokens; derived from the same secret, so the file format stays as it is. */
    readonly accessTokenKey: Redacted.Redacted<Uint8Array>
    /** Signs the tokens one node gives another for a relayed connection (the node hop). */
    readonly nodeTokenKey: Redacted.Redacted<Uint8Array>
    /** The key nodes prove themselves with on the runner port (TLS-PSK), unless certificates are given. */
    readonly runnerKey: Redacted.Redacted<Uint8Array>
    /** Signs sandbox gateway links. */
    readonly gatewayTokenKey: Redacted.Redacted<Uint8Array>
    /** Signs a session's connect tokens (`rbs_cdp_...`), the credential DevTools discovery's URLs carry. */
    readonly connectTokenKey: Redacted.Redacted<Uint8Array>
    /** Signs an assistant runtime's tokens (`asrt_...`). */
    readonly assistantTokenKey: Redacted.Redacted<Uint8Array>
    /** Encrypts secrets the service keeps (webhook signing secrets) at rest (AES-256-GCM). */
    readonly secretsAtRestKey: Redacted.Redacted<Uint8Array>
  }
>()("rbs/auth/Secrets") {
  static readonly layer = Layer.effect(
    Secrets,
    Effect.gen(function* () {
      const config = { ...(yield* NodeConfig), ...(yield* SecretsConfig) }
      if (Option.isSome(config.secretsKey)) {
        const key = Buffer.from(Redacted.value(config.secretsKey.value), "utf8")
        return fromRoot(Buffer.from(Crypto.hkdfSync("sha256", key, "", "rbs secrets root", 32)))
      }
      if (Option.isSome(config.runner)) {
        return yield* Effect.die(
          new SecretsFileError({
            message:
              "SECRETS_KEY is required with RUNNER_ADDRESS: every node signs and verifies tokens with it, so give all nodes the same one (32 characters or more)"
          })
        )
      }
      const file = Path.join(config.dataDir, "secrets.json")
      const text = yield* Effect.promise(async () => {
        const existing = await Fs.readFile(file, "utf8").catch(() => undefined)
        if (existing !== undefined) return existing
        const created: SecretsFile = { previewTokenKey: Crypto.randomBytes(32).toString("base64url") }
        await Fs.mkdir(config.dataDir, { recursive: true })
        // `wx`: when another process wins the race to create it, use its file.
        await Fs.writeFile(file, JSON.stringify(created, null, 2), { mode: 0o600, flag: "wx" }).catch(
          () => undefined
        )
        return Fs.readFile(file, "utf8")
      })
      const secrets = yield* Schema.decodeUnknownEffect(SecretsFile)(text).pipe(
        Effect.mapError(
          () =>
            new SecretsFileError({
              message: `${file} is not a valid secrets file; restore it from a backup or remove it (tokens it signed stop working)`
            })
        ),
        Effect.orDie
      )
      return fromRoot(Buffer.from(secrets.previewTokenKey, "base64url"))
    })
  )
}

const derive = (root: Buffer, purpose: string) =>
  Redacted.make(new Uint8Array(Crypto.hkdfSync("sha256", root, "", purpose, 32)))

const fromRoot = (root: Buffer) =>
  Secrets.of({
    previewTokenKey: Redacted.make(root),
    accessTokenKey: derive(root, "rbs access tokens"),
    nodeTokenKey: derive(root, "rbs node tokens"),
    runnerKey: derive(root, "rbs runner transport"),
    gatewayTokenKey: derive(root, "rbs gateway tokens"),
    connectTokenKey: derive(root, "rbs connect tokens"),
    assistantTokenKey: derive(root, "rbs assistant runtime tokens"),
    secretsAtRestKey: derive(root, "rbs secrets at rest")
  })
