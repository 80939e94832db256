import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { audits, requires } from "../policy/Access.ts"
import { Authenticate, Authorize } from "../policy/AuthMiddleware.ts"
import { InvalidField } from "../../kernel/Errors.ts"
import { SshKeyExists, SshKeyNotFound } from "../../kernel/IdentityErrors.ts"
import { SshKeyInfo } from "../../kernel/Identity.ts"

export class SshKeysApi extends HttpApiGroup.make("sshKeys")
  .add(
    HttpApiEndpoint.post("create", "/v1/ssh-keys", {
      payload: Schema.Struct({
        public_key: Schema.String,
        name: Schema.optionalKey(Schema.NullOr(Schema.String))
      }),
      success: Schema.Struct({ key: SshKeyInfo }),
      error: [InvalidField.Wire, SshKeyExists.Wire]
    })
      .annotateMerge(requires("workspaces.write", "any", audits("ssh_key.added", "ssh_key")))
      .annotate(
        OpenApi.Description,
        "Registers an OpenSSH public key (`<type> <base64> [comment]`, one line) for the active account: `ssh-ed25519`, `ecdsa-sha2-nistp256/384/521`, or `ssh-rsa` of at least 2048 bits. `key_fingerprint` is as `ssh-keygen -lf` prints it (`SHA256:...`); `name` defaults to the key's comment. 400 `invalid_field` for a malformed or weak key, 409 `ssh_key_exists` for the same key twice in the account."
      ),
    HttpApiEndpoint.get("list", "/v1/ssh-keys", {
      success: Schema.Struct({ keys: Schema.Array(SshKeyInfo) })
    }).annotateMerge(requires("workspaces.read")),
    HttpApiEndpoint.delete("delete", "/v1/ssh-keys/:id", {
      params: { id: Schema.String },
      success: HttpApiSchema.NoContent,
      error: SshKeyNotFound.Wire
    }).annotateMerge(requires("workspaces.write", "any", audits("ssh_key.deleted", "ssh_key", "id")))
  )
  .middleware(Authorize)
  .middleware(Authenticate)
  .annotate(OpenApi.Title, "SSH keys") {}
