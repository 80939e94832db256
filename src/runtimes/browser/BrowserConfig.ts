import { Context, Layer } from "effect"
import { ServiceConfig, type ServiceConfigShape } from "../../platform/config/Config.ts"

/** A node's browsers: where Chromium is, how many, what each may use, what they inherit, their downloads' life. */
export interface BrowserSettings {
  readonly chromePath: ServiceConfigShape["chromePath"]
  readonly browserPoolSize: ServiceConfigShape["browserPoolSize"]
  readonly maxBrowsers: ServiceConfigShape["maxBrowsers"]
  readonly browserLimits: ServiceConfigShape["browserLimits"]
  readonly browserUidBase: ServiceConfigShape["browserUidBase"]
  readonly browserProfilesInMemory: ServiceConfigShape["browserProfilesInMemory"]
  readonly browserEnv: ServiceConfigShape["browserEnv"]
  readonly inContainer: ServiceConfigShape["inContainer"]
  readonly downloadRetentionHours: ServiceConfigShape["downloadRetentionHours"]
}

/** `CHROME_PATH`, `BROWSER_POOL_SIZE`, `MAX_BROWSERS`, `BROWSER_*`, `DOWNLOAD_RETENTION_HOURS`. */
export class BrowserConfig extends Context.Service<BrowserConfig, BrowserSettings>()(
  "rbs/browser/BrowserConfig"
) {
  static readonly layer = Layer.effect(
    BrowserConfig,
    ServiceConfig.useSync((config) => ({
      chromePath: config.chromePath,
      browserPoolSize: config.browserPoolSize,
      maxBrowsers: config.maxBrowsers,
      browserLimits: config.browserLimits,
      browserUidBase: config.browserUidBase,
      browserProfilesInMemory: config.browserProfilesInMemory,
      browserEnv: config.browserEnv,
      inContainer: config.inContainer,
      downloadRetentionHours: config.downloadRetentionHours
    }))
  )
}
