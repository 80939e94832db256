import { Context, Layer } from "effect"
import { ServiceConfig } from "../../platform/config/Config.ts"

/**
 * `JOB_LEASE_SECONDS`: how long a claimed job is its node's without a renewal; `JOB_RETENTION_DAYS`:
 * how long a finished job is kept.
 */
export class JobsConfig extends Context.Service<
  JobsConfig,
  { readonly jobLeaseMs: number; readonly jobRetentionDays: number }
>()("rbs/jobs/JobsConfig") {
  static readonly layer = Layer.effect(
    JobsConfig,
    ServiceConfig.useSync((config) => ({
      jobLeaseMs: config.jobLeaseMs,
      jobRetentionDays: config.jobRetentionDays
    }))
  )
}
