import { Effect } from "effect"
import * as FsSync from "node:fs"
import type { CommandLog, LogRecord } from "../../runtime/Exec.ts"

export type { LogRecord }

/** Output kept in memory before the log moves to its file. */
const IN_MEMORY = 256 * 1024
/** Every this many records, where the next one starts: a resume walks at most this many heads. */
const CHECKPOINT_EVERY = 1024
const KINDS = { stdout: 0x6f, stderr: 0x65, exit: 0x78 } as const
const BY_CODE = new Map<number, LogRecord["kind"]>([
  [KINDS.stdout, "stdout"],
  [KINDS.stderr, "stderr"],
  [KINDS.exit, "exit"]
])

/**
 * What one session's command logs may hold together: `keptBytes` in all
 * (past it, output is counted, not kept, as past one log's cap) and
 * `memoryBytes` of it in the service's memory (past it, a log moves to its
 * file at once). A log gives its share back when it is closed.
 */
export class OutputBudget {
  kept = 0
  inMemory = 0
  readonly keptBytes: number
  readonly memoryBytes: number
  constructor(keptBytes: number, memoryBytes: number) {
    this.keptBytes = keptBytes
    this.memoryBytes = memoryBytes
  }
}

/** A log of its own, for a command outside a session's budget (tests). */
const unbounded = () => new OutputBudget(Number.POSITIVE_INFINITY, Number.POSITIVE_INFINITY)

/**
 * A command's output as an append-only log of records
 * `[kind: 1 byte][length: 4 bytes][data]`, numbered from 1: a reader that
 * last saw record N (its SSE `Last-Event-ID`) resumes with record N + 1, so
 * nothing is lost or repeated. Small logs stay in memory; past 256 KiB the
 * log moves to a file in the sandbox's dir (removed with it), so output
 * never fills the service's memory. Past `cap` bytes (or its session's
 * budget) output is no longer kept, only counted (`dropped`); the exit record
 * is always written. Closing it removes its file.
 */
export class OutputLog implements CommandLog {
  private memory: Buffer = Buffer.allocUnsafe(4096)
  private fd: number | undefined
  private waiters: Array<() => void> = []
  /** Byte offset of record `i * CHECKPOINT_EVERY + 1`. */
  private readonly checkpoints: Array<number> = [0]
  /** Bytes in the log. */
  length = 0
  /** Records in the log: the last one's id. */
  records = 0
  /** Output bytes not kept because the log reached its cap. */
  dropped = 0
  ended = false
  private closed = false
  private readonly path: string
  private readonly cap: number
  private readonly budget: OutputBudget

  constructor(path: string, cap: number, budget: OutputBudget = unbounded()) {
    this.path = path
    this.cap = cap
    this.budget = budget
  }

  append(kind: LogRecord["kind"], data: Buffer) {
    if (this.ended || this.closed) return
    if (
      kind !== "exit" &&
      (this.length + 5 + data.length > this.cap || this.budget.kept + 5 + data.length > this.budget.keptBytes)
    ) {
      this.dropped += data.length
      return
    }
    const head = Buffer.allocUnsafe(5)
    head[0] = KINDS[kind]
    head.writeUInt32BE(data.length, 1)
    this.write(head)
    this.write(data)
    this.records++
    if (this.records % CHECKPOINT_EVERY === 0) this.checkpoints.push(this.length)
    if (kind === "exit") this.ended = true
    for (const wake of this.waiters.splice(0)) wake()
  }

  private write(bytes: Buffer) {
    if (
      this.fd === undefined &&
      (this.length + bytes.length > IN_MEMORY ||
        this.budget.inMemory + bytes.length > this.budget.memoryBytes)
    ) {
      this.fd = FsSync.openSync(this.path, "w+", 0o600)
      FsSync.writeSync(this.fd, this.memory, 0, this.length, 0)
      this.memory = Buffer.alloc(0)
      this.budget.inMemory -= this.length
    }
    this.budget.kept += bytes.length
    if (this.fd === undefined) {
      this.budget.inMemory += bytes.length
      if (this.length + bytes.length > this.memory.length) {
        const grown = Buffer.allocUnsafe(Math.max(this.memory.length * 2, this.length + bytes.length))
        this.memory.copy(grown, 0, 0, this.length)
        this.memory = grown
      }
      bytes.copy(this.memory, this.length)
    } else FsSync.writeSync(this.fd, bytes, 0, bytes.length, this.length)
    this.length += bytes.length
  }

  private bytes(from: number, to: number): Buffer {
    if (this.fd !== undefined) {
      const out = Buffer.allocUnsafe(to - from)
      FsSync.readSync(this.fd, out, 0, out.length, from)
      return out
    }
    return Buffer.from(this.memory.subarray(from, to))
  }

  /** Where record `id + 1` starts. */
  private offsetAfter(id: number): number {
    const checkpoint = Math.floor(id / CHECKPOINT_EVERY)
    let offset = this.checkpoints[checkpoint]!
    for (let skip = id - checkpoint * CHECKPOINT_EVERY; skip > 0; skip--) {
      offset += 5 + this.bytes(offset + 1, offset + 5).readUInt32BE(0)
    }
    return offset
  }

  /** The records after `id` (0: from the first), about `max` bytes of them (at least one). */
  read(after: number, max = 1024 * 1024): Array<LogRecord> {
    if (this.closed || after < 0 || after >= this.records) return []
    const from = this.offsetAfter(after)
    const window = this.bytes(from, Math.min(this.length, from + Math.max(max, 5)))
    const records: Array<LogRecord> = []
    let offset = 0
    let id = after
    while (window.length - offset >= 5) {
      const length = window.readUInt32BE(offset + 1)
      const kind = BY_CODE.get(window[offset]!)!
      if (window.length - offset < 5 + length) {
        // A record larger than the window: read it whole.
        if (records.length === 0) {
          records.push({ kind, data: this.bytes(from + offset + 5, from + offset + 5 + length), id: id + 1 })
        }
        break
      }
      records.push({ kind, data: window.subarray(offset + 5, offset + 5 + length), id: ++id })
      offset += 5 + length
    }
    return records
  }

  /** Completes once the log has more than `records` records, or has ended; an interrupted wait leaves no waiter behind. */
  waitBeyond(records: number): Effect.Effect<void> {
    return Effect.callback<void>((resume) => {
      if (this.records > records || this.ended) return resume(Effect.void)
      const wake = () => resume(Effect.void)
      this.waiters.push(wake)
      return Effect.sync(() => {
        const at = this.waiters.indexOf(wake)
        if (at >= 0) this.waiters.splice(at, 1)
      })
    })
  }

  close() {
    if (this.closed) return
    this.closed = true
    this.budget.kept -= this.length
    if (this.fd !== undefined) {
      FsSync.closeSync(this.fd)
      FsSync.rmSync(this.path, { force: true })
    } else this.budget.inMemory -= this.length
    this.fd = undefined
    this.memory = Buffer.alloc(0)
    for (const wake of this.waiters.splice(0)) wake()
  }
}
