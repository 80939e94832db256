/**
 * A sandbox's directory watches: each follows its directory through the
 * supervisor (a connection held open) and keeps its newest changes, numbered
 * from 1, for its event streams and their resumes after a reconnect. Bounded
 * per session: `MAX_WATCHES` at once, `KEPT_CHANGES` kept by each (a reader
 * further behind is told it lost some).
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
/** The changes a watch keeps for readers (the newest). */
export const KEPT_CHANGES = 10_000

class Watch implements FileWatch {
  readonly id = `fw_${Crypto.randomBytes(12).toString("base64url")}`
  readonly createdAt = new Date()
  endedAt: Date | null = null
  changes = 0
  private kept: Array<FileChange & { readonly id: number }> = []
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
    // Dropped in halves past the bound, so each change costs O(1) on average.
    if (this.kept.length > KEPT_CHANGES * 1.5) this.kept = this.kept.slice(-KEPT_CHANGES)
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
    const first = this.kept[0]?.id ?? this.changes + 1
    return {
      lost: after + 1 < first && after < this.changes,
      changes: this.kept.filter((change) => change.id > after)
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
