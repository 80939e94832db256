import { Context, Layer } from "effect"
import { ServiceConfig } from "../../platform/config/Config.ts"

/** `AUDIT_RETENTION_DAYS`: audit events older than this are deleted. */
export class AuditConfig extends Context.Service<AuditConfig, { readonly auditRetentionDays: number }>()(
  "rbs/audit/AuditConfig"
) {
  static readonly layer = Layer.effect(
    AuditConfig,
    ServiceConfig.useSync((config) => ({ auditRetentionDays: config.auditRetentionDays }))
  )
}
