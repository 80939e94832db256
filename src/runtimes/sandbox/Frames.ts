/**
 * The supervisor protocol's framing (native/supervisor.c, docs/internals/sandbox-protocol.md):
 * `[type: 1 byte][length: 4 bytes, big-endian][payload]`, at most 1 MiB of
 * payload. Pure: tested without a sandbox.
 */

export const MAX_FRAME = 1 << 20

export interface Frame {
  readonly type: string
  readonly payload: Buffer
}

export const encode = (type: string, payload: Buffer | string = Buffer.alloc(0)): Buffer => {
  const body = typeof payload === "string" ? Buffer.from(payload) : payload
  if (body.length > MAX_FRAME) throw new RangeError(`a frame of ${body.length} bytes`)
  const head = Buffer.allocUnsafe(5)
  head.write(type, 0, 1, "latin1")
  head.writeUInt32BE(body.length, 1)
  return Buffer.concat([head, body])
}

/** Frames of data larger than one frame may carry, in order. */
export const encodeChunked = (type: string, data: Buffer): Array<Buffer> => {
  const frames: Array<Buffer> = []
  for (let offset = 0; offset < data.length; offset += MAX_FRAME) {
    frames.push(encode(type, data.subarray(offset, offset + MAX_FRAME)))
  }
  return frames
}

/** `a=<arg>`, `e=<NAME=value>`, `d=<cwd>`, `t=<cols> <rows>` fields of a spawn request. */
export const spawnFields = (request: {
  readonly argv: ReadonlyArray<string>
  readonly env?: Readonly<Record<string, string>> | undefined
  readonly cwd?: string | undefined
  readonly pty?: { readonly cols: number; readonly rows: number } | undefined
}): Buffer => {
  const fields = [
    ...request.argv.map((arg) => `a=${arg}`),
    ...Object.entries(request.env ?? {}).map(([name, value]) => `e=${name}=${value}`),
    ...(request.cwd === undefined ? [] : [`d=${request.cwd}`]),
    ...(request.pty === undefined ? [] : [`t=${request.pty.cols} ${request.pty.rows}`])
  ]
  return Buffer.from(fields.map((field) => `${field}\0`).join(""))
}

/** What a reader gives for bytes that are no frame: an error, after which it reads nothing more. */
export const MALFORMED: Frame = { type: "E", payload: Buffer.from("a malformed answer from the sandbox") }

/**
 * Splits a byte stream into frames; what follows the last whole frame waits
 * for more. The stream comes from inside a sandbox, so it never throws: a
 * frame over `MAX_FRAME` reads as `MALFORMED` (an `E`, which ends every
 * exchange) and the stream is read no further.
 */
export class FrameReader {
  private pending: Buffer = Buffer.alloc(0)
  private broken = false

  /** The whole frames so far; with `last`, none after the first it accepts (raw bytes may follow it). */
  push(chunk: Buffer, last?: (frame: Frame) => boolean): Array<Frame> {
    if (this.broken) return []
    this.pending = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk])
    const frames: Array<Frame> = []
    let offset = 0
    while (this.pending.length - offset >= 5) {
      const length = this.pending.readUInt32BE(offset + 1)
      if (length > MAX_FRAME) {
        this.broken = true
        this.pending = Buffer.alloc(0)
        frames.push(MALFORMED)
        return frames
      }
      if (this.pending.length - offset < 5 + length) break
      const frame = {
        type: String.fromCharCode(this.pending[offset]!),
        payload: this.pending.subarray(offset + 5, offset + 5 + length)
      }
      frames.push(frame)
      offset += 5 + length
      if (last?.(frame) === true) break
    }
    this.pending = this.pending.subarray(offset)
    return frames
  }

  /** The bytes after the last whole frame (a dial's first raw bytes). */
  rest(): Buffer {
    const rest = this.pending
    this.pending = Buffer.alloc(0)
    return rest
  }
}

/** A NUL-separated payload's fields. */
const fieldsOf = (payload: Buffer): Array<string> => payload.toString("utf8").split("\0")

const ENTRY_TYPES = { f: "file", d: "directory", l: "symlink", o: "other" } as const

/** An `N` entry of a list, stat, mkdir or move: `<type> <size> <mode> <mtime>\0<name>\0<link target>`. */
export const decodeEntry = (payload: Buffer) => {
  const [head = "", name = "", target = ""] = fieldsOf(payload)
  const [type = "o", size = "0", mode = "0", mtime = "0"] = head.split(" ")
  return {
    name,
    type: ENTRY_TYPES[type as keyof typeof ENTRY_TYPES] ?? "other",
    size: Number(size),
    mode: Number.parseInt(mode, 8),
    modifiedAt: new Date(Math.floor(Number(mtime) * 1000)),
    target: type === "l" ? target : null
  } as const
}

const CHANGE_TYPES = new Set(["create", "modify", "delete", "move", "overflow"])

/** An `N` change of a watch: `<event> <is dir>\0<path>\0<to>`; undefined for an event this side does not know. */
export const decodeChange = (payload: Buffer) => {
  const [head = "", path = "", to = ""] = fieldsOf(payload)
  const [type = "", directory = "0"] = head.split(" ")
  if (!CHANGE_TYPES.has(type)) return undefined
  return {
    type: type as "create" | "modify" | "delete" | "move" | "overflow",
    path,
    to: type === "move" ? to : null,
    directory: directory === "1"
  } as const
}
