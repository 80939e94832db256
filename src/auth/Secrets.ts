import { Context, Effect, Layer, Redacted } from "effect"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import { ServiceConfig } from "../Config.ts"

interface SecretsFile {
  readonly previewTokenKey: string
}

/**
 * Keys the service signs with, generated at first start into
 * `DATA_DIR/secrets.json` (mode 0600) so tokens survive a restart.
 */
export class Secrets extends Context.Service<
  Secrets,
  {
    readonly previewTokenKey: Redacted.Redacted<Buffer>
  }
>()("rbs/auth/Secrets") {
  static readonly layer = Layer.effect(
    Secrets,
    Effect.gen(function* () {
      const config = yield* ServiceConfig
      const file = Path.join(config.dataDir, "secrets.json")
      const secrets = yield* Effect.promise(async (): Promise<SecretsFile> => {
        const existing = await Fs.readFile(file, "utf8").catch(() => undefined)
        if (existing !== undefined) return JSON.parse(existing) as SecretsFile
        const created: SecretsFile = { previewTokenKey: Crypto.randomBytes(32).toString("base64url") }
        await Fs.mkdir(config.dataDir, { recursive: true })
        await Fs.writeFile(file, JSON.stringify(created, null, 2), { mode: 0o600, flag: "wx" }).catch(
          async () => {
            // Another process won the race: use its file.
          }
        )
        return JSON.parse(await Fs.readFile(file, "utf8")) as SecretsFile
      })
      return Secrets.of({ previewTokenKey: Redacted.make(Buffer.from(secrets.previewTokenKey, "base64url")) })
    })
  )
}
