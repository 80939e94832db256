/**
 * A sandbox's directory watches: each follows its directory through the
 * supervisor (a connection held open) and keeps its newest changes, numbered
 * from 1, for its event streams and their resumes after a reconnect. Bounded
 * per session: `MAX_WATCHES` at once, `KEPT_CHANGES` (and `KEPT_BYTES`) kept
 * by each (a reader further behind is told it lost some).
 */
import { Effect } from "effect"
import * as Crypto from "node:crypto"
import {
  type DirectoryWatch,
  type FileChange,
  type FileTransfer,
  type FileWatch,
  type WatchRegistry,
  WatchesFull
} from "../../runtime/Exec.ts"
import type { SupervisorError } from "../../runtime/SupervisorError.ts"

/** Watches one session holds at once. */
export const MAX_WATCHES = 8
/** The changes a watch keeps for readers (the newest)... */
export const KEPT_CHANGES = 10_000
/** ...and their bytes at most (paths of up to 4 KiB each: 10,000 of those would be 80 MiB a watch). */
export const KEPT_BYTES = 2 * 1024 * 1024

/** What a change holds in memory, about. */
const sizeOf = (change: FileChange) => 64 + 2 * (change.path.length + (change.to?.length ?? 0))

class Watch implements FileWatch {
  readonly id = `fw_${Crypto.randomBytes(12).toString("base64url")}`
  readonly createdAt = new Date()
  endedAt: Date | null = null
  changes = 0
  /** The kept changes, oldest first, from `kept[start]`: their ids are consecutive. */
  private kept: Array<FileChange & { readonly id: number }> = []
  private start = 0
  private bytes = 0
  private waiters: Array<() => void> = []
  handle: DirectoryWatch | undefined
  readonly path: string
  readonly recursive: boolean

  constructor(path: string, recursive: boolean) {
    this.path = path
    this.recursive = recursive
  }

  add(change: FileChange) {
    if (this.endedAt !== null) return
    this.changes += 1
    this.kept.push({ ...change, id: this.changes })
    this.bytes += sizeOf(change)
    while (this.kept.length - this.start > KEPT_CHANGES || this.bytes > KEPT_BYTES) {
      this.bytes -= sizeOf(this.kept[this.start]!)
      this.start += 1
    }
    // The dropped ones leave the array in one go once they are half of it: O(1) a change on average.
    if (this.start > 1024 && this.start * 2 > this.kept.length) {
      this.kept = this.kept.slice(this.start)
      this.start = 0
    }
    this.wake()
  }

  end() {
    if (this.endedAt !== null) return
    this.endedAt = new Date()
    this.handle?.stop()
    this.wake()
  }

  private wake() {
    for (const waiter of this.waiters.splice(0)) waiter()
  }

  read(after: number) {
    const first = this.kept[this.start]?.id ?? this.changes + 1
    return {
      lost: after + 1 < first && after < this.changes,
      changes: this.kept.slice(this.start + Math.max(0, after + 1 - first))
    }
  }

  waitBeyond(changes: number): Effect.Effect<void> {
    return Effect.callback<void>((resume) => {
      if (this.changes > changes || this.endedAt !== null) return resume(Effect.void)
      const waiter = () => resume(Effect.void)
      this.waiters.push(waiter)
      return Effect.sync(() => {
        const at = this.waiters.indexOf(waiter)
        if (at >= 0) this.waiters.splice(at, 1)
      })
    })
  }
}

/** The watches of a sandbox whose files are `files`; `close` ends them all (the sandbox's end). */
export const make = (files: FileTransfer): WatchRegistry & { readonly close: () => void } => {
  const watches = new Map<string, Watch>()
  return {
    start: (path, recursive) =>
      Effect.suspend((): Effect.Effect<FileWatch, SupervisorError | WatchesFull> => {
        if (watches.size >= MAX_WATCHES) return Effect.fail(new WatchesFull({ max: MAX_WATCHES }))
        const watch = new Watch(path, recursive)
        // Its place is held while the supervisor sets it up, so racing starts cannot pass the bound.
        watches.set(watch.id, watch)
        return files
          .watch(
            path,
            recursive,
            (change) => watch.add(change),
            // Its directory removed or moved away, or the sandbox gone: the watch has ended.
            () => watch.end()
          )
          .pipe(
            Effect.tap((handle) =>
              Effect.sync(() => {
                watch.handle = handle
              })
            ),
            Effect.as(watch as FileWatch),
            Effect.onError(() => Effect.sync(() => watches.delete(watch.id)))
          )
      }),
    get: (id) => watches.get(id),
    list: () => [...watches.values()].reverse(),
    stop: (id) => {
      const watch = watches.get(id)
      if (watch === undefined) return false
      watch.end()
      watches.delete(id)
      return true
    },
    close: () => {
      for (const watch of watches.values()) watch.end()
      watches.clear()
    }
  }
}
