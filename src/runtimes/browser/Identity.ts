import type { Effect, Scope } from "effect"
import type { BrowserIdentity } from "../../kernel/BrowserIdentity.ts"
import type * as Cdp from "../../platform/cdp/CdpClient.ts"
import type { PageFollower } from "../../platform/cdp/PageFollower.ts"
import { SCREEN } from "./Chromium.ts"

/**
 * A session's browser identity (`user_agent`, `locale`, `timezone`,
 * `viewport` at create), given to the browser launched for it.
 *
 * Most of it goes in at launch, the one place Chromium applies it to every
 * page, worker and service worker alike, before any of them runs: the user
 * agent (`--user-agent`), the languages (`--lang`, `--accept-lang`), the time
 * zone (the browser's `TZ`), the device scale (`--force-device-scale-factor`).
 * What Chromium takes only per page (`navigator.platform`, the client hints
 * `navigator.userAgentData` and `Sec-CH-UA*`, `Intl`'s default locale, a phone's viewport) the
 * service's own connection sets on each page as it is made, paused until then
 * (`followPages`). Per target alone would not hold: a service worker ignores
 * every user agent override, and a dedicated worker's languages do not follow
 * its page's (measured on Chromium 156).
 */

/** The switches and environment of a browser launched for `identity`. */
export const launchOf = (identity: BrowserIdentity) => {
  const args: Array<string> = []
  const env: Record<string, string> = {}
  if (identity.locale !== undefined)
    args.push(`--lang=${identity.locale}`, `--accept-lang=${acceptLanguageOf(identity.locale)}`)
  if (identity.timezone !== undefined) env.TZ = identity.timezone
  const viewport = identity.viewport
  const scale = viewport?.device_scale_factor ?? 1
  if (scale !== 1) args.push(`--force-device-scale-factor=${scale}`)
  // A screen at least as large as the window, as every desktop has (a phone's is its viewport); in
  // device pixels, as Chromium reads it.
  const css =
    viewport === undefined
      ? undefined
      : viewport.mobile === true
        ? { width: viewport.width, height: viewport.height }
        : { width: Math.max(SCREEN.width, viewport.width), height: Math.max(SCREEN.height, viewport.height) }
  const screen =
    css === undefined
      ? undefined
      : { width: Math.round(css.width * scale), height: Math.round(css.height * scale) }
  return { args, env, userAgent: identity.user_agent, screen }
}

/** What a page's `Emulation.setUserAgentOverride` says for `userAgent`: the reads that must agree with it. */
export const userAgentOverride = (userAgent: string, locale: string | undefined) => {
  const platform = platformOf(userAgent)
  const metadata = clientHintsOf(userAgent, platform)
  return {
    userAgent,
    ...(locale === undefined ? {} : { acceptLanguage: acceptLanguageOf(locale) }),
    platform: platform.navigator,
    ...(metadata === undefined ? {} : { userAgentMetadata: metadata })
  }
}

/** `de-DE` is `de-DE,de` (Chromium weighs them itself). */
const acceptLanguageOf = (locale: string) => {
  const language = locale.split("-")[0]!
  return language === locale ? language : `${locale},${language}`
}

interface Platform {
  /** `navigator.platform`. */
  readonly navigator: string
  /** The client hints' platform and its version. */
  readonly hint: string
  readonly version: string
  readonly architecture: string
  readonly mobile: boolean
  readonly model: string
}

/** The platform a user agent names, as that platform's Chrome reports it. */
export const platformOf = (userAgent: string): Platform => {
  const arm = /\b(?:aarch64|arm64|armv\d+)/i.test(userAgent)
  const mobile = /\bMobile\b/.test(userAgent)
  const android = /\bAndroid(?: ([\d.]+))?(?:; ([^;)]+))?/.exec(userAgent)
  if (android !== null)
    return {
      navigator: "Linux armv81",
      hint: "Android",
      version: android[1] ?? "",
      architecture: "",
      mobile,
      model: android[2]?.trim() === "K" ? "" : (android[2]?.trim() ?? "")
    }
  if (/\biPhone\b/.test(userAgent))
    return { navigator: "iPhone", hint: "iOS", version: "", architecture: "", mobile: true, model: "" }
  if (/\biPad\b/.test(userAgent))
    return { navigator: "iPad", hint: "iOS", version: "", architecture: "", mobile, model: "" }
  const windows = /\bWindows NT ([\d.]+)/.exec(userAgent)
  if (windows !== null)
    return {
      navigator: "Win32",
      hint: "Windows",
      // Windows 10 and 11 both say NT 10.0; Chrome's hint for 10 is 10.0.0.
      version: windows[1] === "10.0" ? "10.0.0" : "",
      architecture: arm ? "arm" : "x86",
      mobile,
      model: ""
    }
  const mac = /\bMac OS X ([\d_.]+)/.exec(userAgent)
  if (mac !== null || /\bMacintosh\b/.test(userAgent))
    return {
      navigator: "MacIntel",
      hint: "macOS",
      version: (mac?.[1] ?? "").replaceAll("_", "."),
      architecture: arm ? "arm" : "x86",
      mobile,
      model: ""
    }
  if (/\bCrOS\b/.test(userAgent))
    return {
      navigator: "Linux x86_64",
      hint: "Chrome OS",
      version: "",
      architecture: "x86",
      mobile,
      model: ""
    }
  return {
    navigator: arm ? "Linux aarch64" : "Linux x86_64",
    hint: "Linux",
    version: "",
    architecture: arm ? "arm" : "x86",
    mobile,
    model: ""
  }
}

/**
 * The client hints a Chrome or Edge of that user agent gives (its brands, its
 * version and platform); `undefined` for any other browser's, which gives none.
 */
export const clientHintsOf = (userAgent: string, platform = platformOf(userAgent)) => {
  const chrome = /\bChrome\/(\d+)((?:\.\d+){0,3})/.exec(userAgent)
  if (chrome === null || /\b(?:OPR|YaBrowser|SamsungBrowser|Firefox)\//.test(userAgent)) return undefined
  const edge = /\bEdg(?:e|A|iOS)?\/(\d+)((?:\.\d+){0,3})/.exec(userAgent)
  const [major, rest] = edge === null ? [chrome[1]!, chrome[2]!] : [edge[1]!, edge[2]!]
  const full = `${major}${rest}`.split(".").concat(["0", "0", "0"]).slice(0, 4).join(".")
  const chromeFull = `${chrome[1]}${chrome[2]}`.split(".").concat(["0", "0", "0"]).slice(0, 4).join(".")
  const named = edge === null ? "Google Chrome" : "Microsoft Edge"
  const brands = [
    { brand: "Not:A-Brand", version: "8" },
    { brand: "Chromium", version: chrome[1]! },
    { brand: named, version: major }
  ]
  const fullVersionList = [
    { brand: "Not:A-Brand", version: "8.0.0.0" },
    { brand: "Chromium", version: chromeFull },
    { brand: named, version: full }
  ]
  return {
    brands,
    fullVersionList,
    fullVersion: full,
    platform: platform.hint,
    platformVersion: platform.version,
    architecture: platform.architecture,
    model: platform.model,
    mobile: platform.mobile,
    bitness: platform.architecture === "" ? "" : "64",
    wow64: false
  }
}

/** Whether the identity needs each page set as it is made (`followPages`). */
export const followsPages = (identity: BrowserIdentity) =>
  identity.user_agent !== undefined || identity.locale !== undefined || identity.viewport?.mobile === true

/**
 * Sets each page of the browser, the ones open now and every one made later,
 * before it runs (the browser's follower holds each paused until its hooks'
 * commands are in): its user agent's platform and client hints, and a
 * phone's viewport. For the caller's scope; only pages (the browser's own UI
 * targets are never attached).
 */
export const followPages = (
  control: Cdp.CdpClient,
  follower: PageFollower,
  identity: BrowserIdentity
): Effect.Effect<void, never, Scope.Scope> => {
  const agent =
    identity.user_agent === undefined ? undefined : userAgentOverride(identity.user_agent, identity.locale)
  const viewport = identity.viewport
  return follower.follow(undefined, ({ sessionId: session }) => {
    // In order, in the page's session: it runs once all of them are in.
    if (agent !== undefined) control.post("Emulation.setUserAgentOverride", agent, session)
    // One session's alone (Chromium refuses a second's): a client's attach leaves it be.
    if (identity.locale !== undefined)
      control.post("Emulation.setLocaleOverride", { locale: identity.locale }, session)
    if (viewport?.mobile === true) {
      control.post(
        "Emulation.setDeviceMetricsOverride",
        {
          width: viewport.width,
          height: viewport.height,
          deviceScaleFactor: viewport.device_scale_factor ?? 1,
          mobile: true,
          screenWidth: viewport.width,
          screenHeight: viewport.height
        },
        session
      )
      control.post("Emulation.setTouchEmulationEnabled", { enabled: true, maxTouchPoints: 5 }, session)
    }
  })
}
