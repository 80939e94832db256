import { Context, Effect, Layer } from "effect"
import * as FsSync from "node:fs"
import { EgressSettings } from "../config/Config.ts"

// The hosts a `block_ads` session's egress proxy refuses: those an ad or tracker list blocks whole.
// A proxy sees a host, not a page's element or the kind of request, so of a list in Adblock Plus
// syntax it takes the rules that block a host outright (`||host^`, or `||host^$third-party`: a
// host that is only ever a third party), and the unconditional exceptions (`@@||host^`); of a
// hosts file, every host it points at 0.0.0.0 or 127.0.0.1. Everything else in the lists (element
// hiding, paths, rules for some sites only) needs the page, and is left to an extension.

const HOST = /^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)+$/
const BLOCK_RULE = /^\|\|([^/^$*|]+)\^(?:\$third-party)?$/
const EXCEPTION_RULE = /^@@\|\|([^/^$*|]+)\^(?:\$document)?$/
const HOSTS_LINE = /^(?:0\.0\.0\.0|127\.0\.0\.1|::1?)\s+([^\s#]+)/

export interface AdHostList {
  readonly blocked: ReadonlySet<string>
  readonly excepted: ReadonlySet<string>
}

/** The hosts `text` (a list in Adblock Plus syntax or a hosts file) blocks, and those it excepts. */
export const parse = (text: string, into: { blocked: Set<string>; excepted: Set<string> }) => {
  for (const raw of text.split("\n")) {
    const line = raw.trim().toLowerCase()
    if (line === "" || line.startsWith("!") || line.startsWith("#") || line.startsWith("[")) continue
    const rule = BLOCK_RULE.exec(line)
    if (rule !== null) {
      if (HOST.test(rule[1]!) || rule[1] === "localhost") into.blocked.add(rule[1]!)
      continue
    }
    // A hosts file names the machine's own names too (`127.0.0.1 localhost`): those are no ad's.
    const entry = HOSTS_LINE.exec(line)
    if (entry !== null) {
      if (HOST.test(entry[1]!) && !entry[1]!.endsWith(".localdomain")) into.blocked.add(entry[1]!)
      continue
    }
    const exception = EXCEPTION_RULE.exec(line)
    if (exception !== null && HOST.test(exception[1]!)) into.excepted.add(exception[1]!)
  }
  return into
}

/** Whether `host` or a domain above it is blocked, and neither it nor one above it excepted. */
export const isBlocked = (list: AdHostList, host: string) => {
  const name = host.toLowerCase().replace(/\.$/, "")
  let blocked = false
  for (let at = 0; at !== -1; at = name.indexOf(".", at + 1)) {
    const domain = at === 0 ? name : name.slice(at + 1)
    if (list.excepted.has(domain)) return false
    if (list.blocked.has(domain)) blocked = true
  }
  return blocked
}

/**
 * The node's ad and tracker hosts (`BLOCK_ADS_LISTS`): whether there is a list is known at start;
 * the lists are read once, at the first host asked about (some 90,000 hosts of EasyList and
 * EasyPrivacy in about 180 ms, which a node that never blocks ads never spends).
 */
export class AdHosts extends Context.Service<
  AdHosts,
  {
    /** Why `block_ads` cannot be had on this node (none of the lists is there), or `undefined`. */
    readonly unavailable: string | undefined
    readonly blocks: (host: string) => boolean
  }
>()("rbs/egress/AdHosts") {
  static readonly layer = Layer.effect(
    AdHosts,
    Effect.gen(function* () {
      const { blockAdsLists } = yield* EgressSettings
      const present = blockAdsLists.filter((path) => FsSync.existsSync(path))
      const unavailable =
        present.length === 0
          ? `block_ads needs an ad and tracker list, and none was found (${blockAdsLists.join(", ")}): install Debian's webext-ublock-origin-chromium (npm start does), or set BLOCK_ADS_LISTS`
          : undefined
      let list: AdHostList | undefined
      const read = () => {
        const into = { blocked: new Set<string>(), excepted: new Set<string>() }
        for (const path of present) {
          try {
            parse(FsSync.readFileSync(path, "utf8"), into)
          } catch {
            // Gone since the start: the others still count.
          }
        }
        return into
      }
      return AdHosts.of({ unavailable, blocks: (host) => isBlocked((list ??= read()), host) })
    })
  )
}
