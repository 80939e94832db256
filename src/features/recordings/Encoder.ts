import { Effect, Schema } from "effect"
import { spawn } from "node:child_process"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import * as DataDir from "../../platform/files/DataDir.ts"
import { jpegSize } from "../../runtime/Jpeg.ts"
import { frameFile, readSpool, type SpooledFrame } from "./Spool.ts"

export class EncodeFailed extends Schema.TaggedError<EncodeFailed>()("EncodeFailed", {
  message: Schema.String
}) {}

/** The shortest time a frame stays on screen in the video (a clock that went backwards). */
const MIN_FRAME_SECONDS = 0.001
/** The last frame stays this long at least, so a one-frame recording still plays. */
const MIN_LAST_FRAME_SECONDS = 0.2

/**
 * The ffconcat list of a spool: each frame shown until the next one came (the
 * screencast sends frames only when the page changes), the last until the
 * recording ended. Its total is the video's duration.
 */
export const concatList = (frames: ReadonlyArray<SpooledFrame>, endedAt: number) => {
  const lines = ["ffconcat version 1.0"]
  let seconds = 0
  frames.forEach((frame, i) => {
    const next = frames[i + 1]?.t
    const duration =
      next === undefined
        ? Math.max(MIN_LAST_FRAME_SECONDS, (endedAt - frame.t) / 1000)
        : Math.max(MIN_FRAME_SECONDS, (next - frame.t) / 1000)
    seconds += duration
    lines.push(`file '${frameFile(frame.n)}'`, `duration ${duration.toFixed(3)}`)
  })
  // The concat demuxer drops the last entry's duration unless the file is named once more.
  const last = frames.at(-1)
  if (last !== undefined) lines.push(`file '${frameFile(last.n)}'`)
  return { text: `${lines.join("\n")}\n`, durationMs: Math.round(seconds * 1000) }
}

/** Even dimensions (VP9 in yuv420p needs them), from the first frame. */
const videoSize = async (dir: string, first: SpooledFrame) => {
  const size = jpegSize(await Fs.readFile(Path.join(dir, frameFile(first.n))))
  const even = (value: number) => Math.max(2, value - (value % 2))
  return size === undefined
    ? { width: 1280, height: 720 }
    : { width: even(size.width), height: even(size.height) }
}

const run = (file: string, args: ReadonlyArray<string>) =>
  Effect.callback<void, EncodeFailed>((resume) => {
    const child = spawn(file, args, { stdio: ["ignore", "ignore", "pipe"] })
    let stderr = ""
    child.stderr!.on("data", (chunk: Buffer) => {
      if (stderr.length < 4000) stderr += chunk.toString("utf8")
    })
    child.once("error", (error) => resume(Effect.fail(new EncodeFailed({ message: error.message }))))
    child.once("exit", (code) =>
      resume(
        code === 0
          ? Effect.void
          : Effect.fail(
              new EncodeFailed({ message: `ffmpeg exited with ${code}: ${stderr.trim().slice(-500)}` })
            )
      )
    )
    return Effect.sync(() => child.kill("SIGKILL"))
  })

/**
 * Encodes a spool into a WebM (VP9, variable frame rate: a frame per change
 * of the page, each shown as long as it was) at `output`, with ffmpeg at a low
 * priority so live sessions keep the CPU. Frames of another size (a resize)
 * are scaled into the first frame's size.
 */
export const encode = (ffmpeg: string, dir: string, output: string) =>
  Effect.gen(function* () {
    const { frames, endedAt } = yield* Effect.promise(() => readSpool(dir))
    if (frames.length === 0) return yield* new EncodeFailed({ message: "no frame was captured" })
    const list = concatList(frames, endedAt)
    const listFile = Path.join(dir, "frames.ffconcat")
    yield* Effect.promise(() => Fs.writeFile(listFile, list.text, { mode: DataDir.PRIVATE_FILE }))
    const { width, height } = yield* Effect.promise(() => videoSize(dir, frames[0]!))
    yield* run("nice", [
      "-n",
      "10",
      ffmpeg,
      ...["-hide_banner", "-loglevel", "error", "-y"],
      ...["-f", "concat", "-safe", "0", "-i", listFile],
      "-vf",
      `scale=${width}:${height}:force_original_aspect_ratio=decrease,pad=${width}:${height}:(ow-iw)/2:(oh-ih)/2,format=yuv420p`,
      ...["-fps_mode", "vfr", "-threads", "2"],
      ...[
        "-c:v",
        "libvpx-vp9",
        "-deadline",
        "realtime",
        "-cpu-used",
        "8",
        "-row-mt",
        "1",
        "-crf",
        "36",
        "-b:v",
        "0"
      ],
      ...["-f", "webm", output]
    ])
    return { durationMs: list.durationMs, frames: frames.length }
  })
