import * as Fs from "node:fs/promises"

/**
 * Memory of a browser's processes (its process group, as `Chromium.launch`
 * starts it), as their proportional set size: shared pages counted once
 * across them, unlike a sum of RSS. Read without blocking: a renderer's
 * `smaps_rollup` takes the kernel milliseconds to add up.
 */
export const groupPss = async (pgid: number): Promise<number> => {
  let total = 0
  for (const name of await Fs.readdir("/proc")) {
    if (!/^\d+$/.test(name)) continue
    try {
      const stat = await Fs.readFile(`/proc/${name}/stat`, "latin1")
      // pgrp is the third field after the command name.
      if (Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[2]) !== pgid) continue
      const rollup = await Fs.readFile(`/proc/${name}/smaps_rollup`, "latin1")
      total += Number(/^Pss:\s+(\d+) kB/m.exec(rollup)?.[1] ?? 0) * 1024
    } catch {
      // gone
    }
  }
  return total
}
