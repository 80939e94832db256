import { assert, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import { isBlocked, parse } from "../../../src/platform/net/AdHosts.ts"
import { DEFAULT_AD_LISTS } from "../../../src/platform/config/Config.ts"

const listOf = (text: string) => parse(text, { blocked: new Set(), excepted: new Set() })

describe("ad and tracker hosts", () => {
  it("takes the rules that block a host outright, its subdomains with it, and the unconditional exceptions", () => {
    const list = listOf(
      [
        "! a comment",
        "[Adblock Plus 2.0]",
        "||ads.example^",
        "||tracker.example^$third-party",
        "||cdn.example^$script,domain=news.example",
        "||paths.example/banner/*",
        "##.ad-banner",
        "@@||good.ads.example^",
        "@@||tracker.example^$domain=shop.example",
        "0.0.0.0 hosts-file.example",
        "127.0.0.1 localhost",
        "::1 localhost ip6-localhost"
      ].join("\n")
    )
    for (const host of [
      "ads.example",
      "x.ads.example",
      "ADS.EXAMPLE.",
      "tracker.example",
      "hosts-file.example"
    ])
      assert.isTrue(isBlocked(list, host), host)
    for (const host of [
      "good.ads.example",
      "x.good.ads.example",
      "cdn.example",
      "paths.example",
      "example",
      "notads.example",
      "localhost",
      "shop.example"
    ])
      assert.isFalse(isBlocked(list, host), host)
  })

  it("Debian's EasyList and EasyPrivacy block well-known ad and tracker hosts, not the sites people visit", () => {
    const list = { blocked: new Set<string>(), excepted: new Set<string>() }
    for (const path of DEFAULT_AD_LISTS) parse(Fs.readFileSync(path, "utf8"), list)
    assert.isAbove(list.blocked.size, 50_000)
    for (const host of [
      "securepubads.g.doubleclick.net",
      "pagead2.googlesyndication.com",
      "ad.doubleclick.net",
      "stats.g.doubleclick.net"
    ])
      assert.isTrue(isBlocked(list, host), host)
    for (const host of ["example.com", "github.com", "www.wikipedia.org", "registry.npmjs.org", "127.0.0.1"])
      assert.isFalse(isBlocked(list, host), host)
  })
})
