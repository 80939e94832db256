import { Schema } from "effect"

/**
 * The least a sandbox may be given: enough for its supervisor, a shell and a
 * small program. Below it a create is 400 `invalid_field` naming the field;
 * above the operator's maxima (`SANDBOX_RESOURCES_MAX_*`) too.
 */
export const RESOURCE_MINIMA = { cpus: 0.1, memory_mb: 64, disk_mb: 16, pids: 16 } as const

export type ResourceField = keyof typeof RESOURCE_MINIMA

/** What one sandbox runs with: its cgroup's CPU quota, memory and process limits and its disk's size. */
export interface ResourceValues {
  readonly cpus: number
  readonly memory_mb: number
  /** Null: the node gives sandboxes no disk of their own (`SANDBOX_DISK_MB=0`). */
  readonly disk_mb: number | null
  readonly pids: number
}

/** A sandbox's resources as its session shows them (and its row keeps them): what it runs with. */
export const SandboxResources = Schema.Struct({
  cpus: Schema.Number.annotate({
    description: "CPUs of time its processes get together (its cgroup's CPU quota per 100 ms period)."
  }),
  memory_mb: Schema.Int.annotate({
    description:
      "Its memory limit in MiB (and memory with swap, where the machine accounts swap): a program past it is killed by the kernel (`oom_killed` on its command)."
  }),
  disk_mb: Schema.NullOr(Schema.Int).annotate({
    description:
      "The size in MiB of its writable layer, a file system of its own (a write past it gets ENOSPC); null when the node gives sandboxes none (`SANDBOX_DISK_MB=0`)."
  }),
  pids: Schema.Int.annotate({
    description: "Processes and threads it may hold at once (its cgroup's pids limit)."
  })
})
export type SandboxResources = typeof SandboxResources.Type

/** `resources` at create: each field optional, the node's default where absent. */
export const SandboxResourcesRequest = Schema.Struct({
  cpus: Schema.optionalKey(
    Schema.Number.check(Schema.isFinite()).annotate({
      description: `CPUs (a fraction is a share of one: \`0.5\`), at least ${RESOURCE_MINIMA.cpus}; default \`SANDBOX_CPUS\` (1), at most \`SANDBOX_RESOURCES_MAX_CPUS\` (the node's cores).`
    })
  ),
  memory_mb: Schema.optionalKey(
    Schema.Int.annotate({
      description: `Memory in MiB, at least ${RESOURCE_MINIMA.memory_mb}; default \`SANDBOX_MEMORY_MB\` (1024), at most \`SANDBOX_RESOURCES_MAX_MEMORY_MB\` (4 times the default).`
    })
  ),
  disk_mb: Schema.optionalKey(
    Schema.Int.annotate({
      description: `Its writable layer's size in MiB, at least ${RESOURCE_MINIMA.disk_mb}; default \`SANDBOX_DISK_MB\` (2048), at most \`SANDBOX_RESOURCES_MAX_DISK_MB\` (4 times the default). Another size than the default is a sandbox launched for the session, not a warm one (ready in about 0.2 s instead of 25 ms on a 2-core machine). On a node without sandbox disks (\`SANDBOX_DISK_MB=0\`) it is 400 \`invalid_field\`.`
    })
  ),
  pids: Schema.optionalKey(
    Schema.Int.annotate({
      description: `Processes and threads at once, at least ${RESOURCE_MINIMA.pids}; default \`SANDBOX_MAX_TASKS\` (512), at most \`SANDBOX_RESOURCES_MAX_PIDS\` (4 times the default).`
    })
  )
})
export type SandboxResourcesRequest = typeof SandboxResourcesRequest.Type

/** A kind's bounds of `resources`: the node's defaults and maxima (the minima are `RESOURCE_MINIMA`). */
export interface ResourceBounds {
  readonly defaults: ResourceValues
  readonly maxima: ResourceValues
}

/**
 * The resources a create asks for, each absent field the default, or the
 * first field out of bounds (below its minimum, past its maximum, or a disk
 * on a node without sandbox disks).
 */
export const resolveResources = (
  bounds: ResourceBounds,
  asked: SandboxResourcesRequest | undefined
): ResourceValues | { readonly refused: ResourceField } => {
  const resolved = {
    cpus: asked?.cpus ?? bounds.defaults.cpus,
    memory_mb: asked?.memory_mb ?? bounds.defaults.memory_mb,
    disk_mb: asked?.disk_mb ?? bounds.defaults.disk_mb,
    pids: asked?.pids ?? bounds.defaults.pids
  }
  for (const field of ["cpus", "memory_mb", "disk_mb", "pids"] as const) {
    if (asked?.[field] === undefined) continue
    const value = resolved[field]
    const maximum = bounds.maxima[field]
    if (value === null || maximum === null || value < RESOURCE_MINIMA[field] || value > maximum)
      return { refused: field }
  }
  return resolved
}
