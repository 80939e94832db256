import { Schema } from "effect"
import { wire } from "./ApiError.ts"

/** What an uploaded extension may be at most: its zip, its files unpacked, how many. */
export const EXTENSION_LIMITS = {
  zipBytes: 16 * 1024 * 1024,
  unpackedBytes: 64 * 1024 * 1024,
  files: 2000
} as const

/** Extensions a session loads at most. */
export const EXTENSIONS_PER_SESSION = 10

/** Permissions an extension may not ask for: each would reach past what the session's CDP client may. */
export const REFUSED_PERMISSIONS: Record<string, string> = {
  debugger: "it would drive the browser's pages over DevTools, past the relay's guard",
  proxy: "the session's traffic goes through its metering proxy",
  nativeMessaging: "there is no host program to talk to"
}

/** An extension of the account's, as the API shows it. */
export const ExtensionInfo = Schema.Struct({
  id: Schema.String,
  object: Schema.Literal("extension"),
  name: Schema.String.annotate({ description: "Its manifest's `name`." }),
  version: Schema.String.annotate({ description: "Its manifest's `version`." }),
  manifest_version: Schema.Number,
  files: Schema.Number.annotate({ description: "Files in it." }),
  bytes: Schema.Number.annotate({ description: "Its files' size unpacked." }),
  sha256: Schema.String.annotate({ description: "SHA-256 of the zip as uploaded, hex." }),
  created_at: Schema.DateFromString
})
export type ExtensionInfo = typeof ExtensionInfo.Type

export const ExtensionList = Schema.Struct({
  object: Schema.Literal("list"),
  data: Schema.Array(ExtensionInfo)
})

export class ExtensionNotFound extends Schema.TaggedError<ExtensionNotFound>()("ExtensionNotFound", {}) {
  readonly status = 404
  readonly code = "extension_not_found"
  override readonly message = "Extension not found."
  static readonly Wire = wire(this, () => new ExtensionNotFound())
}

/** An upload that is not an extension the service loads, and why. */
export class InvalidExtension extends Schema.TaggedError<InvalidExtension>()("InvalidExtension", {
  reason: Schema.String
}) {
  readonly status = 400
  readonly code = "invalid_extension"
  override get message() {
    return `Not an extension the service can load: ${this.reason}.`
  }
  static readonly Wire = wire(
    this,
    (message) => new InvalidExtension({ reason: /: (.*)\.$/.exec(message)?.[1] ?? "" })
  )
}
