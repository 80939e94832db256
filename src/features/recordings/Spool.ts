import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import * as DataDir from "../../platform/files/DataDir.ts"
import type { Frame } from "../../runtime/Frames.ts"

/** At most this much JPEG is spooled for one recording; frames beyond are dropped (the video ends there). */
export const SPOOL_LIMIT_BYTES = 1024 * 1024 * 1024

/** One line of `index.jsonl`: the frame's number and when the browser captured it (ms since the epoch). */
export interface SpooledFrame {
  readonly n: number
  readonly t: number
}

export const frameFile = (n: number) => `${String(n).padStart(6, "0")}.jpg`
export const INDEX_FILE = "index.jsonl"
export const END_FILE = "end.json"

/**
 * A recording on the node's disk while its session runs: each frame the
 * screencast emits as a JPEG file, and a line in `index.jsonl` once the file
 * is whole, so a crash leaves a spool that can still be encoded up to its last
 * line. Writes go one after another, off the screencast's path.
 */
export class Spool {
  private chain: Promise<void> = Promise.resolve()
  private count = 0
  private bytes = 0
  private full = false
  readonly dir: string

  constructor(dir: string) {
    this.dir = dir
  }

  static async open(dir: string) {
    // A session's screen, frame by frame: the service's alone, as every spool's parent is.
    await DataDir.makePrivate(dir)
    return new Spool(dir)
  }

  get frames() {
    return this.count
  }

  add(frame: Frame) {
    if (this.full) return
    if (this.bytes + frame.jpeg.length > SPOOL_LIMIT_BYTES) {
      this.full = true
      return
    }
    const n = ++this.count
    this.bytes += frame.jpeg.length
    const line = `${JSON.stringify({ n, t: frame.meta.timestamp } satisfies SpooledFrame)}\n`
    this.chain = this.chain
      .then(() => Fs.writeFile(Path.join(this.dir, frameFile(n)), frame.jpeg, { mode: DataDir.PRIVATE_FILE }))
      .then(() => Fs.appendFile(Path.join(this.dir, INDEX_FILE), line, { mode: DataDir.PRIVATE_FILE }))
      .catch(() => undefined)
  }

  /** Waits for the frames in flight and records when the recording ended. */
  async close(endedAt: number) {
    await this.chain
    await Fs.writeFile(Path.join(this.dir, END_FILE), JSON.stringify({ t: endedAt }), {
      mode: DataDir.PRIVATE_FILE
    })
  }
}

/** The frames a spool holds and when it ended (a crashed one: a second after its last frame). */
export const readSpool = async (dir: string) => {
  const index = await Fs.readFile(Path.join(dir, INDEX_FILE), "utf8").catch(() => "")
  const frames: Array<SpooledFrame> = []
  for (const line of index.split("\n")) {
    try {
      const parsed = JSON.parse(line) as SpooledFrame
      if (Number.isInteger(parsed.n) && Number.isFinite(parsed.t)) frames.push(parsed)
    } catch {
      // A line cut short by a crash.
    }
  }
  frames.sort((a, b) => a.n - b.n)
  const end = await Fs.readFile(Path.join(dir, END_FILE), "utf8").then(
    (text) => Number((JSON.parse(text) as { t: number }).t),
    () => (frames.at(-1)?.t ?? 0) + 1000
  )
  return { frames, endedAt: end }
}
