import { Context, Layer } from "effect"
import { ServiceConfig } from "../../platform/config/Config.ts"

/**
 * `IMAGE_MAX_MB`: the largest image a pull brings in, in bytes as stored (its layers compressed);
 * `IMAGE_MAX_UNPACKED_MB`: what its layers may unpack to.
 */
export class ImagesConfig extends Context.Service<
  ImagesConfig,
  { readonly maxBytes: number; readonly maxUnpackedBytes: number }
>()("rbs/images/ImagesConfig") {
  static readonly layer = Layer.effect(
    ImagesConfig,
    ServiceConfig.useSync((config) => ({
      maxBytes: config.imageMaxBytes,
      maxUnpackedBytes: config.imageMaxUnpackedBytes
    }))
  )
}
