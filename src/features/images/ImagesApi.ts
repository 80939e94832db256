import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { audits, requires } from "../policy/Access.ts"
import { Authenticate, Authorize } from "../policy/AuthMiddleware.ts"
import { InvalidField, ResourceLimitReached } from "../../kernel/Errors.ts"
import {
  CreateImageRequest,
  ImageExists,
  ImageInfo,
  ImageList,
  ImageNotFound,
  InvalidImageReference
} from "../../kernel/Image.ts"
import { PageSizeFromString } from "../../kernel/Session.ts"

const id = { id: Schema.String }

const LIFE =
  "An image is `pulling`, then `ready` (sandbox sessions may run it: `image` at create names it) or `failed` (`error.code` says why: `image_too_large` past `IMAGE_MAX_MB`, default 2048, its layers as stored; `registry_unauthorized` when the registry refused the credentials, or asked for some and none were given; `image_pull_failed` for anything else the registry or the pull refused, `error.message` quoting it; `pull_interrupted` when the node pulling it stopped first). Poll `GET /v1/images/{id}` until it is not `pulling`. A failed image keeps its name until it is deleted."

export class ImagesApi extends HttpApiGroup.make("images")
  .add(
    HttpApiEndpoint.post("create", "/v1/images", {
      payload: CreateImageRequest,
      success: ImageInfo.pipe(HttpApiSchema.status(202)),
      error: [InvalidField.Wire, InvalidImageReference.Wire, ImageExists.Wire, ResourceLimitReached.Wire]
    })
      .annotateMerge(requires("images.write", "any", audits("image.created", "image")))
      .annotate(
        OpenApi.Description,
        `Pulls an OCI image from a registry into the account's images: 202 at once with the image \`pulling\`; the pull goes on in the background (the service's own registry client, on the node that took the request: every connection, each redirect included, is checked by the SSRF guard) and the image is kept whole in the blob store, so every node runs it. \`reference\` is \`docker://<registry>[:<port>]/<repository>[:<tag>|@sha256:<digest>]\` (or the same without \`docker://\`; no registry is Docker Hub's); any other transport (\`oci:\`, \`dir:\`, \`docker-archive:\`, ...) would read the service's own files and is 400 \`invalid_image_reference\`, as is a registry whose address the SSRF guard refuses (private, loopback, link-local, the service's own ports; \`REGISTRY_ALLOW_CIDRS\` opens exceptions, and only there is plain http spoken). \`credentials\` (\`username\`, \`password\`) are for a private registry: kept sealed while the pull runs, erased when it ends, never in an answer, a list, a log or an error. 409 \`image_exists\` for a name the account has; 409 \`resource_limit\` when the account keeps \`LIMIT_IMAGES_PER_ACCOUNT\` (20) images. ${LIFE}`
      ),
    HttpApiEndpoint.get("list", "/v1/images", {
      query: {
        limit: Schema.optionalKey(PageSizeFromString),
        cursor: Schema.optionalKey(Schema.String)
      },
      success: ImageList,
      error: InvalidField.Wire
    })
      .annotateMerge(requires("images.read"))
      .annotate(
        OpenApi.Description,
        "The account's images, newest first. `limit` 1 to 100 (default 20); pass `next_cursor` as `cursor` for the next page. The node's own images (`rbs images list`) are not listed: sessions may name them all the same."
      ),
    HttpApiEndpoint.get("get", "/v1/images/:id", {
      params: id,
      success: ImageInfo,
      error: ImageNotFound.Wire
    })
      .annotateMerge(requires("images.read"))
      .annotate(
        OpenApi.Description,
        `One of the account's images; another account's is 404 \`image_not_found\`. ${LIFE}`
      ),
    HttpApiEndpoint.delete("delete", "/v1/images/:id", {
      params: id,
      success: HttpApiSchema.NoContent,
      error: ImageNotFound.Wire
    })
      .annotateMerge(requires("images.write", "any", audits("image.deleted", "image", "id")))
      .annotate(
        OpenApi.Description,
        "Deletes the image, and its pull if it is `pulling`: sessions created later cannot name it (a node's image of the same name is what they get); a sandbox already running it keeps it."
      )
  )
  .middleware(Authorize)
  .middleware(Authenticate)
  .annotate(OpenApi.Title, "Images") {}
