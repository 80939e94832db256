/** Timers as the throttle sees them, so a test can drive them by hand. */
export interface Timers {
  readonly now: () => number
  readonly set: (run: () => void, delayMs: number) => unknown
  readonly clear: (handle: unknown) => void
}

export const realTimers: Timers = {
  now: () => performance.now(),
  set: (run, delayMs) => setTimeout(run, delayMs),
  clear: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>)
}

export interface ThrottleOptions<F> {
  /** At least this long between two emitted frames (200 ms: 5 frames a second). */
  readonly intervalMs: number
  /**
   * How long before a slot the frames held for it are acknowledged, so the
   * browser can capture a fresher one in time for the slot.
   */
  readonly ackLeadMs: number
  readonly emit: (frame: F) => void
  /** Tells the browser a frame was taken: it sends no new ones while two wait. */
  readonly ack: (frame: F) => void
  readonly timers?: Timers
}

/**
 * The live view's frame limit, enforced whatever the page does: frames are
 * emitted at least `intervalMs` apart, a frame after a quiet moment goes out
 * at once (not at the next slot), and of the frames that arrive within one
 * interval only the newest is emitted, at the slot. Chromium's screencast
 * sends a frame per paint while its frames are acknowledged (60 a second for
 * an animation); holding the acknowledgements until shortly before the next
 * slot keeps that down to a few a slot without emitting stale frames.
 */
export class FrameThrottle<F> {
  private lastEmit = Number.NEGATIVE_INFINITY
  private pending: F | undefined
  private unacked: Array<F> = []
  private slotTimer: unknown
  private leadTimer: unknown
  private leadDone = false
  private closed = false
  private readonly timers: Timers
  private readonly options: ThrottleOptions<F>

  constructor(options: ThrottleOptions<F>) {
    this.options = options
    this.timers = options.timers ?? realTimers
  }

  push(frame: F): void {
    if (this.closed) return this.options.ack(frame)
    const now = this.timers.now()
    if (this.pending === undefined && now - this.lastEmit >= this.options.intervalMs) {
      this.lastEmit = now
      this.options.emit(frame)
      return this.options.ack(frame)
    }
    this.pending = frame
    this.unacked.push(frame)
    const slot = this.lastEmit + this.options.intervalMs
    if (this.slotTimer === undefined) {
      this.slotTimer = this.timers.set(() => this.flush(), Math.max(0, slot - now))
    }
    if (!this.leadDone && this.leadTimer === undefined) {
      this.leadTimer = this.timers.set(
        () => {
          this.leadTimer = undefined
          this.leadDone = true
          this.ackHeld()
        },
        Math.max(0, slot - this.options.ackLeadMs - now)
      )
    }
  }

  /** Stops emitting; frames held are acknowledged so the browser is never left waiting. */
  close(): void {
    this.closed = true
    this.clearTimers()
    this.pending = undefined
    this.ackHeld()
  }

  private flush() {
    this.clearTimers()
    this.leadDone = false
    const frame = this.pending
    this.pending = undefined
    if (frame !== undefined) {
      this.lastEmit = this.timers.now()
      this.options.emit(frame)
    }
    this.ackHeld()
  }

  private ackHeld() {
    const held = this.unacked
    this.unacked = []
    for (const frame of held) this.options.ack(frame)
  }

  private clearTimers() {
    if (this.slotTimer !== undefined) this.timers.clear(this.slotTimer)
    if (this.leadTimer !== undefined) this.timers.clear(this.leadTimer)
    this.slotTimer = undefined
    this.leadTimer = undefined
  }
}
