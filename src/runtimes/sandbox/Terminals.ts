/** A sandbox's terminals (PTY WebSockets) open now: a resize reaches them all. */
export class Terminals {
  private readonly open = new Set<(cols: number, rows: number) => void>()
  /** The size a new terminal starts with: the last resize, else 80 x 24. */
  size = { cols: 80, rows: 24 }

  add(resize: (cols: number, rows: number) => void): () => void {
    this.open.add(resize)
    return () => this.open.delete(resize)
  }

  resizeAll(cols: number, rows: number) {
    this.size = { cols, rows }
    for (const resize of this.open) resize(cols, rows)
  }

  get count() {
    return this.open.size
  }
}
