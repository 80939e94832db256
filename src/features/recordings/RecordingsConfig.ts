import { Context, Layer } from "effect"
import { ServiceConfig } from "../../platform/config/Config.ts"

/** `FFMPEG_PATH` (what encodes recordings) and `RECORDING_RETENTION_DAYS`. */
export class RecordingsConfig extends Context.Service<
  RecordingsConfig,
  { readonly ffmpegPath: string; readonly recordingRetentionDays: number }
>()("rbs/recordings/RecordingsConfig") {
  static readonly layer = Layer.effect(
    RecordingsConfig,
    ServiceConfig.useSync((config) => ({
      ffmpegPath: config.ffmpegPath,
      recordingRetentionDays: config.recordingRetentionDays
    }))
  )
}
