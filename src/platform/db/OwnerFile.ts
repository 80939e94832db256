import * as Fs from "node:fs/promises"

/** Whether a process with `pid` exists (signal 0 checks without sending anything). */
export const isAlive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

export type Claim = { readonly _tag: "Owned" } | { readonly _tag: "Taken"; readonly owner: number }

/**
 * Claims `file` for this process: created exclusively with our pid, so of two
 * processes starting at once only one owns it. A file left by a process that
 * died is stale and claimed anew; one of a live process is `Taken`.
 */
export const claim = async (file: string): Promise<Claim> => {
  for (let attempt = 0; attempt < 5; attempt++) {
    try {
      await Fs.writeFile(file, String(process.pid), { flag: "wx" })
      return { _tag: "Owned" }
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error
    }
    const owner = Number((await Fs.readFile(file, "utf8").catch(() => "")).trim())
    if (owner === process.pid) return { _tag: "Owned" }
    if (Number.isInteger(owner) && owner > 0 && isAlive(owner)) return { _tag: "Taken", owner }
    await Fs.rm(file, { force: true })
  }
  throw new Error(`cannot claim ${file}`)
}

/** Gives `file` up, if this process still holds it. */
export const release = async (file: string) => {
  const owner = Number((await Fs.readFile(file, "utf8").catch(() => "")).trim())
  if (owner === process.pid) await Fs.rm(file, { force: true })
}
