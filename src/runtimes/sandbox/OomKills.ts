import * as FsSync from "node:fs"
import * as Path from "node:path"

const COUNTER = /^oom_kill (\d+)$/m

/**
 * How many processes of a sandbox the kernel's OOM killer has killed so far,
 * from its cgroup: `memory.oom_control` under the v1 memory hierarchy (these
 * machines), `memory.events` under the unified one. The kernel counts a kill
 * in the victim's own cgroup, whichever limit ran out. 0 when neither file
 * can be read (the cgroup is gone). A read is a few microseconds: done at
 * each command's start and end.
 */
export const oomKillsOf = (cgroupPath: string) => {
  const files = [
    Path.join("/sys/fs/cgroup/memory", cgroupPath, "memory.oom_control"),
    Path.join("/sys/fs/cgroup", cgroupPath, "memory.events")
  ]
  return (): number => {
    for (const file of files) {
      try {
        const found = COUNTER.exec(FsSync.readFileSync(file, "utf8"))
        if (found !== null) return Number(found[1])
      } catch {
        // Not this layout: the next file.
      }
    }
    return 0
  }
}
