import { Schema } from "effect"
import { wire } from "./ApiError.ts"

/** An image's name in the account (what `image` at session create takes): as the node's store names its own. */
export const IMAGE_NAME = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/

/** `pulling` until the pull ends, then `ready` (sessions may run it) or `failed` (`error` says why). */
export const ImageStatus = Schema.Literals(["pulling", "ready", "failed"])
export type ImageStatus = typeof ImageStatus.Type

/**
 * Why a pull failed (`error.code` of a `failed` image): past `IMAGE_MAX_MB`, refused by the
 * registry's authentication, not found or unreadable there, or stopped with its node.
 */
export const ImagePullFailure = Schema.Literals([
  "image_too_large",
  "registry_unauthorized",
  "image_pull_failed",
  "pull_interrupted"
])
export type ImagePullFailure = typeof ImagePullFailure.Type

/** An image of the account's, as the API shows it: never its registry credentials. */
export const ImageInfo = Schema.Struct({
  id: Schema.String,
  object: Schema.Literal("image"),
  name: Schema.String.annotate({
    description: "What `image` at session create names it by; unique in the account."
  }),
  reference: Schema.String.annotate({
    description: "What was pulled, normalized: `docker://<registry>/<repository>[:<tag>|@<digest>]`."
  }),
  status: ImageStatus,
  digest: Schema.NullOr(Schema.String).annotate({
    description: "The registry's manifest digest of what was pulled (`sha256:...`); null until `ready`."
  }),
  bytes: Schema.NullOr(Schema.Number).annotate({
    description: "Its size as stored (its layers compressed); null until `ready`."
  }),
  error: Schema.NullOr(
    Schema.Struct({
      code: ImagePullFailure,
      message: Schema.String
    })
  ).annotate({ description: "Why a `failed` pull failed; null otherwise." }),
  created_at: Schema.DateFromString,
  ready_at: Schema.NullOr(Schema.DateFromString)
})
export type ImageInfo = typeof ImageInfo.Type

export const ImageList = Schema.Struct({
  object: Schema.Literal("list"),
  data: Schema.Array(ImageInfo),
  has_more: Schema.Boolean,
  next_cursor: Schema.NullOr(Schema.String)
})

/** `POST /v1/images`. */
export const CreateImageRequest = Schema.Struct({
  reference: Schema.String.annotate({
    description:
      "An image in a registry: `docker://<registry>[:<port>]/<repository>[:<tag>|@sha256:<digest>]`, or the same without `docker://`; a reference with no registry is Docker Hub's (`docker.io`). No other transport."
  }),
  name: Schema.optionalKey(
    Schema.String.annotate({
      description:
        "Its name in the account: letters, digits, `_`, `.` and `-`, up to 128. Default: the repository's last part, with `-<tag>` unless the tag is `latest`."
    })
  ),
  credentials: Schema.optionalKey(
    Schema.Struct({
      username: Schema.String,
      password: Schema.String
    }).annotate({
      description:
        "For a private registry: kept sealed while the pull runs, erased when it ends, never shown."
    })
  )
})
export type CreateImageRequest = typeof CreateImageRequest.Type

export class ImageNotFound extends Schema.TaggedError<ImageNotFound>()("ImageNotFound", {}) {
  readonly status = 404
  readonly code = "image_not_found"
  override readonly message = "Image not found."
  static readonly Wire = wire(this, () => new ImageNotFound())
}

/** The account has an image of that name already. */
export class ImageExists extends Schema.TaggedError<ImageExists>()("ImageExists", {
  name: Schema.String
}) {
  readonly status = 409
  readonly code = "image_exists"
  override get message() {
    return `This account has an image named ${this.name}: delete it first, or choose another name.`
  }
  static readonly Wire = wire(
    this,
    (message) => new ImageExists({ name: /named (.*): delete/.exec(message)?.[1] ?? "" })
  )
}

/** A reference the service does not pull, and why. */
export class InvalidImageReference extends Schema.TaggedError<InvalidImageReference>()(
  "InvalidImageReference",
  { reason: Schema.String }
) {
  readonly status = 400
  readonly code = "invalid_image_reference"
  override get message() {
    return `Not an image reference the service pulls: ${this.reason}.`
  }
  static readonly Wire = wire(
    this,
    (message) => new InvalidImageReference({ reason: /: (.*)\.$/.exec(message)?.[1] ?? "" })
  )
}
