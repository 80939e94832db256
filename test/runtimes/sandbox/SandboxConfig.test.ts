import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect } from "effect"
import { resolveResources } from "../../../src/kernel/SandboxResources.ts"
import { fromEnv } from "../../../src/platform/config/ConfigEnv.ts"
import { defaultResources, makeSandboxConfig } from "../../../src/runtimes/sandbox/SandboxConfig.ts"

describe("a sandbox's resources", () => {
  it("default to the node's settings, at most four times them (the node's cores for CPUs)", () => {
    const config = makeSandboxConfig({}, "/data", false, 8)
    assert.deepStrictEqual(defaultResources(config), { cpus: 1, memory_mb: 1024, disk_mb: 2048, pids: 512 })
    assert.deepStrictEqual(config.maxima, { cpus: 8, memory_mb: 4096, disk_mb: 8192, pids: 2048 })
    const set = makeSandboxConfig(
      { memoryMb: 512, maxTasks: 100, diskMb: 0, cpus: 2, maxMemoryMb: 768, maxCpus: 1, maxPids: 50 },
      "/data",
      false,
      8
    )
    assert.deepStrictEqual(defaultResources(set), { cpus: 2, memory_mb: 512, disk_mb: null, pids: 100 })
    // A maximum is never below the default (then the default is the most), and no disks, no disk_mb.
    assert.deepStrictEqual(set.maxima, { cpus: 2, memory_mb: 768, disk_mb: null, pids: 100 })
  })

  it("are read from SANDBOX_RESOURCES_MAX_*", () =>
    Effect.gen(function* () {
      const input = yield* fromEnv.parse(
        ConfigProvider.fromEnv({
          env: {
            SANDBOX_RESOURCES_MAX_CPUS: "1.5",
            SANDBOX_RESOURCES_MAX_MEMORY_MB: "2048",
            SANDBOX_RESOURCES_MAX_DISK_MB: "4096",
            SANDBOX_RESOURCES_MAX_PIDS: "1000"
          }
        })
      )
      assert.deepStrictEqual(makeSandboxConfig(input.sandbox ?? {}, "/data", false, 8).maxima, {
        cpus: 1.5,
        memory_mb: 2048,
        disk_mb: 4096,
        pids: 1000
      })
    }).pipe(Effect.runSync))

  it("at create: each absent field the default, the first out of bounds refused by name", () => {
    const bounds = {
      defaults: { cpus: 1, memory_mb: 256, disk_mb: 64, pids: 128 },
      maxima: { cpus: 2, memory_mb: 512, disk_mb: 128, pids: 256 }
    }
    assert.deepStrictEqual(resolveResources(bounds, undefined), bounds.defaults)
    assert.deepStrictEqual(resolveResources(bounds, { memory_mb: 512, cpus: 0.1 }), {
      cpus: 0.1,
      memory_mb: 512,
      disk_mb: 64,
      pids: 128
    })
    assert.deepStrictEqual(resolveResources(bounds, { memory_mb: 513 }), { refused: "memory_mb" })
    assert.deepStrictEqual(resolveResources(bounds, { cpus: 0.09 }), { refused: "cpus" })
    assert.deepStrictEqual(resolveResources(bounds, { pids: 15 }), { refused: "pids" })
    assert.deepStrictEqual(resolveResources(bounds, { disk_mb: 16 }), {
      cpus: 1,
      memory_mb: 256,
      disk_mb: 16,
      pids: 128
    })
    const diskless = {
      defaults: { ...bounds.defaults, disk_mb: null },
      maxima: { ...bounds.maxima, disk_mb: null }
    }
    assert.deepStrictEqual(resolveResources(diskless, {}), diskless.defaults)
    assert.deepStrictEqual(resolveResources(diskless, { disk_mb: 64 }), { refused: "disk_mb" })
  })
})
