import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { Schema } from "effect"
import { audits, requires } from "../policy/Access.ts"
import { Authenticate, Authorize } from "../policy/AuthMiddleware.ts"
import { InvalidRequest, RateLimited } from "../../kernel/Errors.ts"
import { PerPrincipalRateLimit } from "../limits/LimitsMiddleware.ts"
import { FileTooLarge } from "../../kernel/SandboxErrors.ts"
import {
  EXTENSION_LIMITS,
  EXTENSIONS_PER_SESSION,
  ExtensionInfo,
  ExtensionList,
  ExtensionNotFound,
  InvalidExtension,
  REFUSED_PERMISSIONS
} from "../../kernel/Extension.ts"

const id = { id: Schema.String }

export class ExtensionsApi extends HttpApiGroup.make("extensions")
  .add(
    HttpApiEndpoint.post("create", "/v1/extensions", {
      success: ExtensionInfo.pipe(HttpApiSchema.status(201)),
      error: [InvalidRequest.Wire, InvalidExtension.Wire, FileTooLarge.Wire, RateLimited.Wire]
    })
      .annotateMerge(requires("sessions.write", "any", audits("extension.created", "extension")))
      // Each is held whole and unpacked in memory: as many a minute as file uploads.
      .annotate(PerPrincipalRateLimit, "file_transfer")
      .annotate(
        OpenApi.Description,
        `Uploads a browser extension for the account's sessions (an extension of the API): multipart form (\`multipart/form-data\`) with the field \`file\`, an unpacked Manifest V3 extension as a zip (its files at the root, or in one top folder), at most ${EXTENSION_LIMITS.zipBytes} bytes (413 \`file_too_large\` beyond, nothing kept), at most ${EXTENSION_LIMITS.files} files and ${EXTENSION_LIMITS.unpackedBytes} bytes unpacked. 400 \`invalid_extension\` says why one is refused: not a zip, a path out of it (\`..\`, absolute, a link), encrypted or zip64, no \`manifest.json\`, a \`manifest_version\` other than 3, no name or version, or a permission sessions do not give (${Object.keys(REFUSED_PERMISSIONS).join(", ")}). Load it with \`extensions: [id]\` at session create (at most ${EXTENSIONS_PER_SESSION}); it runs inside the session's browser and its cell, so it reaches no more than the session's CDP client could. Limited per principal with the file uploads (\`LIMIT_FILE_TRANSFERS_PER_MINUTE\`, 120): 429 \`rate_limited\` with \`Retry-After\` beyond.`
      ),
    HttpApiEndpoint.get("list", "/v1/extensions", {
      success: ExtensionList
    })
      .annotateMerge(requires("sessions.read"))
      .annotate(OpenApi.Description, "The account's extensions, newest first."),
    HttpApiEndpoint.get("get", "/v1/extensions/:id", {
      params: id,
      success: ExtensionInfo,
      error: ExtensionNotFound.Wire
    })
      .annotateMerge(requires("sessions.read"))
      .annotate(
        OpenApi.Description,
        "One of the account's extensions; another account's is 404 `extension_not_found`."
      ),
    HttpApiEndpoint.delete("delete", "/v1/extensions/:id", {
      params: id,
      success: HttpApiSchema.NoContent,
      error: ExtensionNotFound.Wire
    })
      .annotateMerge(requires("sessions.write", "any", audits("extension.deleted", "extension", "id")))
      .annotate(
        OpenApi.Description,
        "Deletes the extension: sessions created later cannot name it (400 `invalid_field` `extensions`); a session already running keeps it."
      )
  )
  .middleware(Authorize)
  .middleware(Authenticate)
  .annotate(OpenApi.Title, "Extensions") {}
