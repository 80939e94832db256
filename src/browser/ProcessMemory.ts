import * as FsSync from "node:fs"

/**
 * Memory of a browser's processes (its process group, as `Chromium.launch`
 * starts it), as their proportional set size: shared pages counted once
 * across them, unlike a sum of RSS.
 */
export const groupPss = (pgid: number): number => {
  let total = 0
  for (const name of FsSync.readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue
    try {
      const stat = FsSync.readFileSync(`/proc/${name}/stat`, "latin1")
      // pgrp is the third field after the command name.
      if (Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[2]) !== pgid) continue
      const rollup = FsSync.readFileSync(`/proc/${name}/smaps_rollup`, "latin1")
      total += Number(/^Pss:\s+(\d+) kB/m.exec(rollup)?.[1] ?? 0) * 1024
    } catch {
      // gone
    }
  }
  return total
}
