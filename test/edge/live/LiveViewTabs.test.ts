import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import puppeteer, { type Browser, type Page } from "puppeteer-core"
import { openSession, request, type RequestOptions, signUp } from "../../support/Client.ts"
import * as LiveViewer from "../../support/LiveViewer.ts"
import * as LocalPage from "../../support/LocalPage.ts"
import * as TestService from "../../support/TestService.ts"

// The live view's tabs and clipboard: a viewer is told the session's pages,
// switches the one screen to another, pastes into the page and copies out of it.

const api = (method: string, path: string, options?: RequestOptions) =>
  Effect.flatMap(TestService.TestService, (service) => request(service.baseUrl, method, path, options))

const previewUrl = (id: string, key: string) =>
  Effect.gen(function* () {
    const minted = yield* api("POST", `/v1/sessions/${id}/preview-token`, { key, body: {} })
    assert.strictEqual(minted.status, 200, minted.text)
    return minted.json.url as string
  })

/** A ready session (`body` at create) of a new account or `key`'s, the account's key and cookie, and puppeteer on it. */
const session = (body: object = {}, key?: string) =>
  Effect.gen(function* () {
    const service = yield* TestService.TestService
    const account = key === undefined ? yield* signUp(service.baseUrl) : { key, cookie: "" }
    const owner = account.key
    const opened = yield* openSession(service.baseUrl, owner, body)
    const browser = yield* Effect.acquireRelease(
      Effect.promise(() =>
        puppeteer.connect({
          browserWSEndpoint: opened.cdp_url,
          headers: { Authorization: `Bearer ${owner}` },
          defaultViewport: null
        })
      ),
      (browser: Browser) => Effect.promise(() => browser.disconnect().catch(() => undefined))
    )
    const [first] = yield* Effect.promise(() => browser.pages())
    return { id: opened.id as string, key: owner, cookie: account.cookie, browser, first: first! }
  })

const goto = (page: Page, url: string) => Effect.promise(() => page.goto(url))
const newTab = (browser: Browser, url: string) =>
  Effect.gen(function* () {
    const tab = yield* Effect.promise(() => browser.newPage())
    yield* goto(tab, url)
    return tab
  })

const read = (page: Page, expression: string) => Effect.promise(() => page.evaluate(expression))

/** Polls the page until `expression` gives `expected`. */
const eventually = (page: Page, expression: string, expected: unknown) =>
  Effect.gen(function* () {
    const deadline = Date.now() + 10_000
    while (true) {
      const value = yield* read(page, expression)
      if (value === expected) return
      if (Date.now() > deadline) assert.strictEqual(value, expected, expression)
      yield* Effect.sleep("20 millis")
    }
  })

const tabOf = (tabs: ReadonlyArray<LiveViewer.Tab>, pattern: RegExp) => {
  const tab = tabs.find((tab) => pattern.test(tab.url))
  assert.isDefined(tab, `a tab of ${pattern} in ${JSON.stringify(tabs)}`)
  return tab!
}
const activeOf = (tabs: ReadonlyArray<LiveViewer.Tab>) =>
  tabs.filter((tab) => tab.active).map((tab) => tab.url)

layer(TestService.layer(), { excludeTestServices: true })("live view tabs and clipboard", (it) => {
  it.effect("the tabs message lists the session's pages at hello and follows them as they change", () =>
    Effect.gen(function* () {
      const pages = yield* LocalPage.serve
      const { id, key, browser, first } = yield* session()
      yield* goto(first, `${pages}counter`)
      const viewer = yield* LiveViewer.open(yield* previewUrl(id, key))
      yield* viewer.tabsWhere("the first list", () => true)
      const atHello = viewer.tabs[0]
      assert.lengthOf(atHello!, 1)
      assert.match(atHello![0]!.id, /^[0-9A-F]{32}$/)
      assert.deepInclude(atHello![0]!, { url: `${pages}counter`, active: true })
      // Chromium tells a title late: it comes within a second or two.
      yield* viewer.tabsWhere("its title", (tabs) => tabs[0]?.title === "counter")

      // A new tab is told, and comes on screen as before.
      const second = yield* newTab(browser, `${pages}second?title=second`)
      const both = yield* viewer.tabsWhere(
        "the second page, titled",
        (tabs) => tabs.length === 2 && tabs[0]!.title === "counter" && tabs[1]!.title === "second"
      )
      assert.deepStrictEqual(
        both.map(({ url, title, active }) => ({ url, title, active })),
        [
          { url: `${pages}counter`, title: "counter", active: false },
          { url: `${pages}second?title=second`, title: "second", active: true }
        ]
      )
      assert.strictEqual(both[0]!.id, atHello![0]!.id, "a page keeps its id")
      // A navigation and a new title are told.
      yield* goto(second, `${pages}third?title=third`)
      yield* viewer.tabsWhere("the navigation", (tabs) => tabs[1]?.title === "third")
      yield* read(second, "document.title = 'renamed'")
      yield* viewer.tabsWhere("the new title", (tabs) => tabs[1]?.title === "renamed")
      // A closed one is gone, and the one left is on screen.
      yield* Effect.promise(() => second.close())
      const left = yield* viewer.tabsWhere("the one left", (tabs) => tabs.length === 1)
      assert.deepStrictEqual(activeOf(left), [`${pages}counter`])
      // Told only when something changed: no burst of identical lists.
      const texts = viewer.tabs.map((tabs) => JSON.stringify(tabs))
      assert.isBelow(texts.length, 16, texts.join("\n"))
    }).pipe(Effect.scoped)
  )

  it.effect("switch_tab moves every viewer's frames and the input to that page, brought to front", () =>
    Effect.gen(function* () {
      const pages = yield* LocalPage.serve
      const { id, key, browser, first } = yield* session()
      yield* goto(first, `${pages}counter`)
      const second = yield* newTab(browser, `${pages}second?title=second`)
      const viewer = yield* LiveViewer.open(yield* previewUrl(id, key))
      yield* viewer.frameOf(/\/second\?title=second$/)
      const tabs = yield* viewer.tabsWhere("two pages", (tabs) => tabs.length === 2)
      assert.strictEqual(yield* read(first, "document.visibilityState"), "hidden", "behind the second")

      viewer.send({ type: "switch_tab", id: tabOf(tabs, /\/counter$/).id })
      yield* viewer.frameOf(/\/counter$/)
      const switched = yield* viewer.tabsWhere("the counter active", (tabs) =>
        activeOf(tabs).every((url) => url.endsWith("/counter"))
      )
      assert.lengthOf(activeOf(switched), 1)
      assert.strictEqual(yield* read(first, "document.visibilityState"), "visible", "in front")
      // The page on screen changes: its frames come, the other's do not.
      yield* read(second, "document.body.style.background = 'orange'")
      yield* read(first, "count.textContent = 'changed'")
      const seen = viewer.frames.length
      yield* viewer.frame(seen + 1)
      assert.match(viewer.frames.at(-1)!.meta.url, /\/counter$/)
      // One screen per session: a viewer that comes now sees the chosen page too.
      const another = yield* LiveViewer.open(yield* previewUrl(id, key))
      assert.match((yield* another.frame(1)).meta.url, /\/counter$/)
      assert.deepStrictEqual(activeOf(another.tabs.at(-1)!), [`${pages}counter`])
      // Input goes to the chosen page.
      yield* read(first, "count.textContent = '0'")
      viewer.send({ type: "click", x: 250, y: 200 })
      yield* eventually(first, "count.textContent", "1")
      assert.deepStrictEqual(viewer.errors, [])

      // The one switched to closes: the newest left comes on screen, as it always has, and in front
      // (closing a tab brings its neighbour to front, not the newest).
      const third = yield* newTab(browser, `${pages}third?title=third`)
      yield* viewer.frameOf(/\/third\?title=third$/)
      viewer.send({ type: "switch_tab", id: tabOf(switched, /\/counter$/).id })
      yield* viewer.frameOf(/\/counter$/)
      yield* Effect.promise(() => first.close())
      yield* read(third, "document.body.style.background = 'green'")
      yield* viewer.frameOf(/\/third\?title=third$/)
      yield* eventually(third, "document.visibilityState", "visible")
      yield* another.frameOf(/\/third\?title=third$/)
    }).pipe(Effect.scoped)
  )

  it.effect(
    "paste types into the focused field; copy answers the selection of the page or of a field, cut when long",
    () =>
      Effect.gen(function* () {
        const pages = yield* LocalPage.serve
        const { id, key, first } = yield* session()
        yield* goto(first, `${pages}counter`)
        yield* read(
          first,
          "window.pasted = []; field.addEventListener('paste', () => pasted.push('paste')); field.addEventListener('input', (e) => pasted.push(e.inputType))"
        )
        const viewer = yield* LiveViewer.open(yield* previewUrl(id, key))
        yield* viewer.frame(1)
        viewer.send({ type: "click", x: 200, y: 410 })
        yield* eventually(first, "document.activeElement === field", true)
        viewer.send({ type: "paste", text: "héllo wörld ✓\ttab" })
        yield* eventually(first, "field.value", "héllo wörld ✓\ttab")
        // Typed as a person's input is, in one insertion.
        assert.deepStrictEqual(yield* read(first, "pasted"), ["insertText"])

        // The selection inside the field.
        yield* read(first, "field.setSelectionRange(6, 11)")
        viewer.send({ type: "copy" })
        assert.deepStrictEqual(yield* viewer.clipboard(1), { text: "wörld", truncated: false })
        // The page's own selection, read as the page shows it whatever its scripts replaced.
        yield* read(
          first,
          `field.blur(); const p = document.createElement("p"); p.id = "words"; p.textContent = "copy these words"; document.body.append(p);
           getSelection().selectAllChildren(words); window.getSelection = () => ({ toString: () => "forged" })`
        )
        viewer.send({ type: "copy" })
        assert.deepStrictEqual(yield* viewer.clipboard(2), { text: "copy these words", truncated: false })
        // Nothing selected: nothing copied.
        yield* read(first, "document.getSelection().removeAllRanges()")
        viewer.send({ type: "copy" })
        assert.deepStrictEqual(yield* viewer.clipboard(3), { text: "", truncated: false })
        // A selection past the bound is cut to it, and says so.
        yield* read(first, "field.value = 'é'.repeat(150000); field.focus(); field.select()")
        viewer.send({ type: "copy" })
        const cut = yield* viewer.clipboard(4)
        assert.isTrue(cut.truncated)
        assert.strictEqual(cut.text, "é".repeat(100_000))
        // A password field's text is never copied, as a person's copy would not.
        yield* read(first, "field.type = 'password'; field.value = 'secret'; field.focus(); field.select()")
        viewer.send({ type: "copy" })
        assert.deepStrictEqual(yield* viewer.clipboard(5), { text: "", truncated: false })
        assert.deepStrictEqual(viewer.errors, [])
      }).pipe(Effect.scoped)
  )

  it.effect(
    "a view-only viewer's switch, paste and copy are refused with an error; an unknown tab is an error, the stream stays",
    () =>
      Effect.gen(function* () {
        const pages = yield* LocalPage.serve
        const { id, key, cookie, browser, first } = yield* session()
        yield* goto(first, `${pages}counter`)
        yield* newTab(browser, `${pages}second?title=second`)
        const readOnly = yield* api("POST", "/v1/keys", {
          cookie,
          body: { name: "viewer", scopes: ["sessions.read"] }
        })
        assert.strictEqual(readOnly.status, 201, readOnly.text)
        const viewOnly = yield* LiveViewer.open(yield* previewUrl(id, readOnly.json.secret))
        assert.isFalse((yield* Effect.promise(() => viewOnly.hello)).input_enabled)
        // It is told the pages all the same.
        const tabs = yield* viewOnly.tabsWhere("two pages", (tabs) => tabs.length === 2)
        yield* viewOnly.frameOf(/\/second\?title=second$/)
        viewOnly.send({ type: "switch_tab", id: tabOf(tabs, /\/counter$/).id })
        viewOnly.send({ type: "paste", text: "nope" })
        viewOnly.send({ type: "copy" })
        yield* viewOnly.error(3)
        assert.deepStrictEqual(
          viewOnly.errors.map((error) => error.code),
          ["input_disabled", "input_disabled", "input_disabled"]
        )
        assert.match(viewOnly.errors[0].message, /sessions\.write/)
        assert.deepStrictEqual(viewOnly.clipboards, [])
        // Nothing moved: the screen, the page's front, its field.
        assert.strictEqual(yield* read(first, "document.visibilityState"), "hidden")
        assert.strictEqual(yield* read(first, "field.value"), "")
        assert.match(viewOnly.frames.at(-1)!.meta.url, /\/second\?title=second$/)
        assert.deepStrictEqual(activeOf(viewOnly.tabs.at(-1)!), [`${pages}second?title=second`])

        const full = yield* LiveViewer.open(yield* previewUrl(id, key))
        full.send({ type: "switch_tab", id: "0123456789ABCDEF0123456789ABCDEF" })
        assert.deepStrictEqual(yield* full.error(1), {
          type: "error",
          code: "unknown_tab",
          message: "no tab 0123456789ABCDEF0123456789ABCDEF in this session"
        })
        // Still open, still switching: and the view-only viewer's screen moves with it.
        full.send({ type: "switch_tab", id: tabOf(tabs, /\/counter$/).id })
        yield* full.frameOf(/\/counter$/)
        yield* viewOnly.frameOf(/\/counter$/)
        yield* eventually(first, "document.visibilityState", "visible")
        assert.lengthOf(full.errors, 1)
      }).pipe(Effect.scoped)
  )

  it.effect("a context session's viewer lists and reaches only its own context's pages", () =>
    Effect.gen(function* () {
      const pages = yield* LocalPage.serve
      const a = yield* session({ isolation: "context" })
      // The same account's second context session: in the same shared browser.
      const b = yield* session({ isolation: "context" }, a.key)
      yield* goto(a.first, `${pages}a-one?title=a-one`)
      const aTwo = yield* newTab(a.browser, `${pages}a-two?title=a-two`)
      yield* goto(b.first, `${pages}b-one?title=b-one`)
      const viewerA = yield* LiveViewer.open(yield* previewUrl(a.id, a.key))
      const viewerB = yield* LiveViewer.open(yield* previewUrl(b.id, b.key))
      const ofA = yield* viewerA.tabsWhere(
        "A's two pages, titled",
        (tabs) => tabs.length === 2 && tabs.every((tab) => tab.title.startsWith("a-"))
      )
      assert.deepStrictEqual(
        ofA.map((tab) => tab.title),
        ["a-one", "a-two"]
      )
      const ofB = yield* viewerB.tabsWhere("B's page", (tabs) => tabs[0]?.title === "b-one")
      assert.deepStrictEqual(
        ofB.map((tab) => tab.title),
        ["b-one"]
      )
      // Another context's page is no tab of B's.
      viewerB.send({ type: "switch_tab", id: tabOf(ofA, /a-two/).id })
      assert.strictEqual((yield* viewerB.error(1)).code, "unknown_tab")
      yield* viewerB.frameOf(/\/b-one\?title=b-one$/)
      // A's viewer switches within A.
      viewerA.send({ type: "switch_tab", id: tabOf(ofA, /a-one/).id })
      yield* viewerA.frameOf(/\/a-one\?title=a-one$/)
      assert.deepStrictEqual(viewerA.errors, [])
      // A page B's client opens is told to B's viewer alone.
      yield* newTab(b.browser, `${pages}b-two?title=b-two`)
      yield* viewerB.tabsWhere("B's second page", (tabs) => tabs.length === 2)
      yield* Effect.promise(() => aTwo.close())
      yield* viewerA.tabsWhere("A's one left", (tabs) => tabs.length === 1)
      assert.isTrue(
        viewerA.tabs.every((tabs) => tabs.every((tab) => /\/a-(one|two)\?/.test(tab.url))),
        JSON.stringify(viewerA.tabs)
      )
    }).pipe(Effect.scoped)
  )
})
