/**
 * The seccomp profile of every sandbox: the usual container default. Any
 * system call not listed fails with EPERM; the list is what ordinary programs
 * use (shells, compilers, interpreters, servers, package managers). What it
 * leaves out reaches the kernel's less-trodden paths: loading modules or BPF,
 * kexec and reboot, keyrings, `perf_event_open`, `userfaultfd`, mounting
 * (the sandbox has no `CAP_SYS_ADMIN` anyway), new namespaces through
 * `clone`/`unshare`, `open_by_handle_at` (the classic container escape),
 * swap, the clock, quotas and accounting.
 */

import { FILE_SYSCALLS } from "./SeccompFiles.ts"
import { IPC_SYSCALLS } from "./SeccompIpc.ts"
import { PROCESS_SYSCALLS } from "./SeccompProcesses.ts"

const ALLOWED = [...FILE_SYSCALLS, ...PROCESS_SYSCALLS, ...IPC_SYSCALLS] as const

/** `clone` flags that make namespaces: refused, as the container default does without CAP_SYS_ADMIN. */
const CLONE_NAMESPACE_FLAGS = 0x7e020000

/** The OCI `linux.seccomp` section. */
export const profile = () => ({
  defaultAction: "SCMP_ACT_ERRNO",
  defaultErrnoRet: 1,
  architectures: ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32", "SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM"],
  syscalls: [
    { names: [...ALLOWED], action: "SCMP_ACT_ALLOW" },
    // clone: threads and processes, no new namespaces.
    {
      names: ["clone"],
      action: "SCMP_ACT_ALLOW",
      args: [{ index: 0, value: CLONE_NAMESPACE_FLAGS, valueTwo: 0, op: "SCMP_CMP_MASKED_EQ" }]
    },
    // clone3 passes its flags in memory, where seccomp cannot look: ENOSYS makes libc fall back to clone.
    { names: ["clone3"], action: "SCMP_ACT_ERRNO", errnoRet: 38 },
    // personality: only the harmless values (Linux, and the 32-bit and no-randomization flags programs ask for).
    ...[0x0, 0x0008, 0x20000, 0x20008, 0xffffffff].map((value) => ({
      names: ["personality"],
      action: "SCMP_ACT_ALLOW",
      args: [{ index: 0, value, op: "SCMP_CMP_EQ" }]
    }))
  ]
})
