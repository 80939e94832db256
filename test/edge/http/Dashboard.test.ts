import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { type Browser, chromium, type Page } from "playwright-core"
import puppeteer from "puppeteer-core"
import { isReady, request, signUp, waitForSession } from "../../support/Client.ts"
import * as LocalPage from "../../support/LocalPage.ts"
import { startService } from "../../support/ServiceProcess.ts"
import * as TestService from "../../support/TestService.ts"

// The dashboard in a real browser (playwright on Debian's Chromium) against the
// service as `npm start` runs it: what a new user does on their first day.

const ARTIFACTS = Path.resolve("test-artifacts", "dashboard")
const AXE = Fs.readFileSync(Path.resolve("node_modules/axe-core/axe.min.js"), "utf8")

const launch = Effect.acquireRelease(
  Effect.promise(() => chromium.launch({ executablePath: "/usr/bin/chromium", args: ["--no-sandbox"] })),
  (browser: Browser) => Effect.promise(() => browser.close())
)

const p = <A>(f: () => Promise<A>) => Effect.promise(f)

/** Serious or critical accessibility violations of the page as it is (axe-core), as `rule: targets`. */
const axeViolations = (page: Page) =>
  p(async () => {
    await page.evaluate(AXE)
    const result: any = await page.evaluate("axe.run()")
    return (result.violations as Array<any>)
      .filter((v) => v.impact === "serious" || v.impact === "critical")
      .map((v) => `${v.id}: ${v.nodes.map((n: any) => n.target.join(" ")).join(", ")}`)
  })

/** A page's screenshot as a test artifact and its accessibility scan, collected for one assertion. */
const checkPage = (page: Page, name: string, problems: Array<string>) =>
  Effect.gen(function* () {
    yield* p(() => page.waitForLoadState("networkidle"))
    yield* p(() => page.screenshot({ path: Path.join(ARTIFACTS, `${name}.png`), fullPage: true }))
    for (const violation of yield* axeViolations(page)) problems.push(`${name}: ${violation}`)
  })

const heading = (page: Page, name: string) =>
  p(() => page.getByRole("heading", { name, level: 1 }).waitFor({ timeout: 15_000 }))

const until = (what: string, check: () => Promise<boolean>, timeoutMs = 15_000) =>
  Effect.gen(function* () {
    const deadline = Date.now() + timeoutMs
    while (!(yield* p(check))) {
      if (Date.now() > deadline) return yield* Effect.die(new Error(`timed out waiting for ${what}`))
      yield* Effect.sleep("50 millis")
    }
  })

describe("the dashboard", () => {
  it.live(
    "a new user registers, makes a key, watches, drives and replays a session, tops up, sees usage, adds a webhook and an organization, on accessible pages",
    () =>
      Effect.gen(function* () {
        assert.isTrue(
          Fs.existsSync("web/dist/index.html"),
          "the dashboard is built (npm test's set-up builds it)"
        )
        Fs.mkdirSync(ARTIFACTS, { recursive: true })
        const databaseUrl = yield* TestService.freshDatabase
        const dataDir = yield* TestService.freshDataDir
        const port = yield* TestService.freePort
        const { baseUrl } = yield* startService({
          PORT: String(port),
          DATA_DIR: dataDir,
          DATABASE_URL: databaseUrl,
          BROWSER_POOL_SIZE: "1",
          EGRESS_ALLOW_CIDRS: "127.0.0.1/32",
          SIGNUP_CREDIT_USD: "5",
          // The webhook receiver is the local page server, on loopback.
          WEBHOOK_ALLOW_CIDRS: "127.0.0.1/32"
        })
        const pages = yield* LocalPage.serve
        const browser = yield* launch
        const context = yield* p(() => browser.newContext({ viewport: { width: 1280, height: 900 } }))
        const page = yield* p(() => context.newPage())
        const problems: Array<string> = []
        const policyViolations: Array<string> = []
        page.on("console", (message) => {
          if (/Content.Security.Policy/i.test(message.text())) policyViolations.push(message.text())
        })
        page.on("dialog", (dialog) => void dialog.accept())

        // Log in page, keyboard order, registration.
        yield* p(() => page.goto(`${baseUrl}/`))
        yield* heading(page, "Log in")
        yield* checkPage(page, "login", problems)
        yield* p(() => page.getByLabel("Email").focus())
        const focused = () => page.evaluate("document.activeElement.id || document.activeElement.textContent")
        yield* p(() => page.keyboard.press("Tab"))
        assert.strictEqual(yield* p(focused), "password")
        yield* p(() => page.keyboard.press("Tab"))
        assert.strictEqual(yield* p(focused), "Log in")
        yield* p(() => page.getByRole("link", { name: "Create an account" }).click())
        yield* heading(page, "Create an account")
        yield* checkPage(page, "register", problems)
        const email = `dashboard-${Date.now()}@example.com`
        yield* p(() => page.getByLabel("Email").fill(email))
        yield* p(() => page.getByLabel("Password").fill("correct horse battery staple"))
        yield* p(() => page.getByRole("button", { name: "Create account" }).click())
        yield* heading(page, "Sessions")
        // Whose account, and which one is active.
        assert.strictEqual(yield* p(() => page.getByLabel("Logged in as").textContent()), email)
        assert.strictEqual(
          yield* p(() => page.getByLabel("Active account").locator("option:checked").textContent()),
          "Personal (owner)"
        )
        yield* checkPage(page, "sessions-empty", problems)

        // Usage before any session.
        yield* p(() => page.getByRole("link", { name: "Usage", exact: true }).click())
        yield* heading(page, "Usage")
        assert.strictEqual(yield* p(() => page.locator("#usage-sessions").textContent()), "0")

        // A key, its secret shown exactly once.
        yield* p(() => page.getByRole("link", { name: "API keys" }).click())
        yield* heading(page, "API keys")
        yield* p(() => page.getByLabel("Key name").fill("laptop"))
        yield* p(() => page.getByRole("button", { name: "Create key" }).click())
        const secret = yield* p(() => page.getByLabel("Secret", { exact: true }).inputValue())
        assert.match(secret, /^svc_live_[A-Za-z0-9_-]{43}$/)
        assert.isTrue(yield* p(() => page.getByRole("button", { name: "Copy" }).isVisible()))
        yield* checkPage(page, "keys-secret", problems)
        yield* p(() => page.getByRole("button", { name: "I have copied it" }).click())
        assert.notInclude(yield* p(() => page.content()), secret, "gone once dismissed")
        yield* p(() => page.reload())
        yield* heading(page, "API keys")
        yield* p(() => page.getByRole("cell", { name: "laptop", exact: true }).waitFor())
        assert.notInclude(yield* p(() => page.content()), secret, "never rendered again")
        assert.include(yield* p(() => page.content()), secret.slice(0, 12), "its prefix is listed")

        // A session made through the API with that key, driven by puppeteer to a local page.
        const created = yield* request(baseUrl, "POST", "/v1/sessions", {
          key: secret,
          body: { recording: true }
        })
        assert.strictEqual(created.status, 201, created.text)
        const id = created.json.id as string
        const driver = yield* Effect.acquireRelease(
          p(() =>
            puppeteer.connect({
              browserWSEndpoint: created.json.cdp_url,
              headers: { Authorization: `Bearer ${secret}` },
              defaultViewport: null
            })
          ),
          (driver) => p(() => driver.disconnect())
        )
        const [remote] = yield* p(() => driver.pages())
        yield* p(() => remote!.goto(`${pages}ticking`))

        // The live view's frames, counted from its socket's first (listening before the page opens it).
        const frames: Array<number> = []
        page.on("websocket", (socket) => {
          if (socket.url().includes(`/sessions/${id}/preview`)) {
            socket.on("framereceived", (frame) => {
              if (typeof frame.payload !== "string") frames.push(Date.now())
            })
          }
        })
        // The session in the list, then its page with the live view.
        yield* p(() => page.getByRole("link", { name: "Sessions", exact: true }).click())
        yield* p(() => page.getByRole("link", { name: `${id.slice(0, 13)}…` }).click())
        yield* heading(page, "Session")
        yield* p(() => page.getByRole("status").filter({ hasText: /^Live/ }).waitFor({ timeout: 20_000 }))
        yield* Effect.sleep("1 second")
        const counted = frames.length
        yield* Effect.sleep("5 seconds")
        // The rate between the window's first and last frame, by their arrival: a count over the sleep
        // would take a frame at each end (26 in 5 s) and the sleep's own lateness under load for more.
        const window = frames.slice(counted)
        const perSecond = window.length < 2 ? 0 : (window.length - 1) / ((window.at(-1)! - window[0]!) / 1000)
        // At most 5 a second, as sent; arrival jitter moves a frame by a few milliseconds either way.
        assert.isAtMost(perSecond, 5.5, `${perSecond} frames a second`)
        assert.isAtLeast(perSecond, 2, `${perSecond} frames a second: the ticking page streams`)
        yield* checkPage(page, "session-live", problems)

        // Click in the live view: the page's button (CSS 100..400 x 100..300) counts it.
        const view = page.getByLabel("Live view of the session")
        // Where a point of the remote page is on the dashboard's view (the view is scaled to fit).
        const clickAt = (x: number, y: number) =>
          p(async () => {
            const box = (await view.boundingBox())!
            await view.click({ position: { x: (x * box.width) / 1280, y: (y * box.height) / 720 } })
          })
        yield* clickAt(250, 200)
        yield* until("the click to reach the page", () =>
          remote!.evaluate(`document.getElementById("count").textContent === "1"`).then(Boolean)
        )
        // Keys typed while the view has focus go to the page's focused field.
        yield* clickAt(200, 410)
        yield* p(() => page.keyboard.type("hello"))
        yield* until("typing to reach the page", () =>
          remote!.evaluate(`document.getElementById("field").value === "hello"`).then(Boolean)
        )

        // A tab the client opens is listed and comes on screen; a click on the first tab puts that one
        // back on screen (in front), and the input goes with it.
        const tabs = page.getByRole("list", { name: "Tabs of the session" })
        const activeTab = tabs.locator('[aria-current="true"]')
        const second = yield* p(() => driver.newPage())
        yield* p(() => second.goto(`${pages}second?title=second`))
        yield* until(
          "the new tab to be listed, on screen",
          async () => (await activeTab.textContent()) === "second"
        )
        yield* p(() => tabs.getByRole("button", { name: "counter" }).click())
        yield* until(
          "the first tab to be on screen",
          async () => (await activeTab.textContent()) === "counter"
        )
        yield* until("its frames to be shown", async () =>
          /\/ticking$/.test((await page.locator(".liveview p.mono").textContent()) ?? "")
        )
        assert.strictEqual(yield* p(() => remote!.evaluate("document.visibilityState")), "visible")
        // Text pasted from the box lands in the page's focused field.
        yield* clickAt(200, 410)
        yield* p(() => page.getByLabel("Text to paste into the page").fill(" wörld"))
        yield* p(() => page.getByRole("button", { name: "Paste into the page" }).click())
        yield* until("the paste to reach the page", () =>
          remote!.evaluate(`document.getElementById("field").value === "hello wörld"`).then(Boolean)
        )
        // The page's selection copied into this browser's clipboard.
        yield* p(() => context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: baseUrl }))
        yield* p(() => remote!.evaluate(`document.getElementById("field").setSelectionRange(6, 11)`))
        yield* p(() => page.getByRole("button", { name: "Copy the page's selection" }).click())
        yield* p(() => page.getByText("Copied the page's selection to your clipboard.").waitFor())
        assert.strictEqual(yield* p(() => page.evaluate("navigator.clipboard.readText()")), "wörld")
        // The browser's own paste while the view has focus types this machine's clipboard into the page.
        yield* clickAt(390, 410)
        yield* p(() => page.keyboard.press("Control+V"))
        yield* until("the browser's paste to reach the page", () =>
          remote!.evaluate(`document.getElementById("field").value === "hello wörldwörld"`).then(Boolean)
        )
        yield* checkPage(page, "session-tabs", problems)

        // A screenshot, shown on the page.
        yield* p(() => page.getByRole("button", { name: "Take screenshot" }).click())
        const shot = page.getByRole("img", { name: "Screenshot of the session's page" })
        yield* p(() => shot.waitFor())
        assert.strictEqual(
          yield* p(() => shot.evaluate((img) => (img as { naturalWidth: number }).naturalWidth)),
          1280
        )

        // Deleting the session ends the stream with its reason.
        yield* p(() => page.getByRole("button", { name: "Delete session" }).click())
        yield* p(() => page.getByText("Session ended: client_delete").first().waitFor({ timeout: 15_000 }))
        // Its recording plays on the page once encoded.
        const video = page.getByLabel("Recording of the session")
        yield* p(() => video.waitFor({ timeout: 30_000 }))
        yield* until("the recording's metadata", () =>
          video.evaluate((v) => (v as { readyState: number }).readyState >= 1)
        )
        const seconds = yield* p(() => video.evaluate((v) => (v as { duration: number }).duration))
        assert.isAbove(seconds, 5, "the video lasts as long as the session was watched")
        // Its log beside it: the page's navigations and the end, each time a way into the recording.
        const log = page.getByRole("list", { name: "Session log" })
        yield* p(() => log.getByText("session ended: client_delete").waitFor({ timeout: 15_000 }))
        yield* p(() => log.getByText("navigation").first().waitFor())
        const seekTo = log.getByRole("listitem").filter({ hasText: "session ended" }).getByRole("button")
        yield* p(() => seekTo.click())
        const position = yield* p(() => video.evaluate((v) => (v as { currentTime: number }).currentTime))
        assert.isAbove(position, 4, "the end's time moved the recording near its end")
        yield* checkPage(page, "session-ended", problems)

        // A top-up through the local checkout moves the balance and the ledger.
        yield* p(() => page.getByRole("link", { name: "Billing", exact: true }).click())
        yield* heading(page, "Billing")
        const before = yield* p(() => page.locator("#balance").textContent())
        yield* p(() => page.getByLabel("Amount (USD)").fill("10"))
        yield* p(() => page.getByRole("button", { name: "Top up" }).click())
        yield* p(() => page.getByRole("button", { name: "Pay 10 USD" }).click())
        yield* p(() => page.getByRole("heading", { name: "Top-up complete" }).waitFor())
        yield* p(() => page.getByRole("link", { name: "Back to the dashboard" }).click())
        yield* heading(page, "Billing")
        const after = yield* p(() => page.locator("#balance").textContent())
        const dollars = (text: string | null) => Number(text?.replace(/[^0-9.]/g, ""))
        assert.approximately(dollars(after) - dollars(before), 10, 0.01, `${before} -> ${after}`)
        yield* p(() => page.getByRole("cell", { name: "topup", exact: true }).waitFor())
        yield* checkPage(page, "billing", problems)

        // Usage moved with the session's egress.
        yield* p(() => page.getByRole("link", { name: "Usage", exact: true }).click())
        yield* heading(page, "Usage")
        assert.strictEqual(yield* p(() => page.locator("#usage-sessions").textContent()), "1")
        assert.notStrictEqual(yield* p(() => page.locator("#usage-bytes").textContent()), "0 B")
        yield* checkPage(page, "usage", problems)

        // A webhook (its signing secret once), an event delivered to it, and a replay.
        yield* p(() => page.getByRole("link", { name: "Webhooks", exact: true }).click())
        yield* heading(page, "Webhooks")
        yield* p(() => page.getByLabel("Endpoint URL").fill(`${pages}hook`))
        yield* p(() => page.getByLabel("key.created").check())
        yield* p(() => page.getByRole("button", { name: "Add webhook" }).click())
        const signing = yield* p(() => page.getByLabel("Secret", { exact: true }).inputValue())
        assert.match(signing, /^whsec_/)
        yield* p(() => page.getByRole("button", { name: "I have copied it" }).click())
        const minted = yield* request(baseUrl, "POST", "/v1/keys", { key: secret, body: { name: "ci" } })
        assert.strictEqual(minted.status, 403, "a full-access key mints no keys")
        yield* p(() => page.getByRole("link", { name: "API keys" }).click())
        yield* heading(page, "API keys")
        yield* p(() => page.getByLabel("Key name").fill("ci"))
        yield* p(() => page.getByRole("button", { name: "Create key" }).click())
        yield* p(() => page.getByLabel("Secret", { exact: true }).waitFor())
        yield* p(() => page.getByRole("link", { name: "Webhooks", exact: true }).click())
        yield* heading(page, "Webhooks")
        yield* until("the key.created delivery to succeed", async () => {
          await page.getByRole("button", { name: "Refresh" }).click()
          return page.getByRole("cell", { name: "succeeded", exact: true }).first().isVisible()
        })
        yield* p(() => page.getByRole("button", { name: "Replay" }).first().click())
        yield* until("the replay to be pending again", () =>
          page
            .getByRole("cell", { name: /^(pending|delivering|succeeded)$/ })
            .first()
            .isVisible()
        )
        assert.strictEqual(yield* p(() => page.getByRole("alert").count()), 0, "the replay was accepted")
        yield* checkPage(page, "webhooks", problems)
        assert.notInclude(yield* p(() => page.content()), signing, "the signing secret is never shown again")

        // An organization: it becomes the active account, its owner listed among its members.
        yield* p(() => page.getByRole("link", { name: "Organization", exact: true }).click())
        yield* heading(page, "Organization")
        yield* p(() => page.getByLabel("Organization name").fill(`acme-${Date.now()}`))
        yield* p(() => page.getByRole("button", { name: "Create organization" }).click())
        yield* heading(page, "Organization")
        yield* until("the new organization to be active", async () =>
          /^acme-\d+ \(owner\)$/.test(
            (await page.getByLabel("Active account").locator("option:checked").textContent()) ?? ""
          )
        )
        yield* p(() => page.getByRole("cell", { name: email, exact: true }).waitFor())
        yield* checkPage(page, "organization", problems)
        // Back to the personal account, where the session and the top-up were.
        yield* p(() => page.getByLabel("Active account").selectOption({ label: "Personal (owner)" }))

        yield* p(() => page.getByRole("link", { name: "Audit events", exact: true }).click())
        yield* heading(page, "Audit events")
        yield* p(() => page.getByRole("cell", { name: "billing.topup_credited" }).first().waitFor())
        yield* checkPage(page, "audit", problems)

        // A phone's width: no page scrolls sideways.
        yield* p(() => page.setViewportSize({ width: 375, height: 800 }))
        for (const [hash, name] of [
          ["#/sessions", "Sessions"],
          ["#/billing", "Billing"],
          [`#/sessions/${id}`, "Session"]
        ] as const) {
          yield* p(() => page.goto(`${baseUrl}/${hash}`))
          yield* heading(page, name)
          assert.isAtMost(
            yield* p(() => page.evaluate<number>("document.documentElement.scrollWidth")),
            375,
            hash
          )
          yield* checkPage(page, `narrow-${name.toLowerCase()}`, problems)
        }

        assert.deepStrictEqual(problems, [], "no serious or critical accessibility violations")
        assert.deepStrictEqual(policyViolations, [], "nothing the Content-Security-Policy refused")
      }).pipe(Effect.scoped),
    240_000
  )

  it.live(
    "a user opens a sandbox's terminal on its session page, runs a command from the keyboard, and the shell takes the page's size",
    () =>
      Effect.gen(function* () {
        Fs.mkdirSync(ARTIFACTS, { recursive: true })
        const databaseUrl = yield* TestService.freshDatabase
        const dataDir = yield* TestService.freshDataDir
        const port = yield* TestService.freePort
        // startService points the service at the image store the set-up built (SANDBOX_IMAGES_DIR).
        const { baseUrl } = yield* startService({
          PORT: String(port),
          DATA_DIR: dataDir,
          DATABASE_URL: databaseUrl,
          BROWSER_POOL_SIZE: "0",
          SIGNUP_CREDIT_USD: "5"
        })
        const account = yield* signUp(baseUrl)
        const created = yield* request(baseUrl, "POST", "/v1/sessions", {
          key: account.key,
          body: { session_type: "sandbox" }
        })
        assert.strictEqual(created.status, 201, created.text)
        const id = created.json.id as string
        yield* waitForSession(baseUrl, account.key, id, isReady)

        const browser = yield* launch
        const context = yield* p(() => browser.newContext({ viewport: { width: 1280, height: 900 } }))
        const page = yield* p(() => context.newPage())
        const problems: Array<string> = []
        const policyViolations: Array<string> = []
        page.on("console", (message) => {
          if (/Content.Security.Policy/i.test(message.text())) policyViolations.push(message.text())
        })
        page.on("dialog", (dialog) => void dialog.accept())
        // Every size the page gives the PTY: the socket's `?cols=&rows=`, then each resize it posts.
        const sizes: Array<{ cols: number; rows: number }> = []
        page.on("websocket", (socket) => {
          const url = new URL(socket.url())
          if (url.pathname === `/v1/sessions/${id}/pty`)
            sizes.push({
              cols: Number(url.searchParams.get("cols")),
              rows: Number(url.searchParams.get("rows"))
            })
        })
        page.on("requestfinished", (sent) => {
          if (sent.method() === "POST" && new URL(sent.url()).pathname === `/v1/sessions/${id}/resize`)
            sizes.push(sent.postDataJSON())
        })

        yield* p(() => page.goto(`${baseUrl}/`))
        yield* heading(page, "Log in")
        yield* p(() => page.getByLabel("Email").fill(account.email))
        yield* p(() => page.getByLabel("Password").fill(account.password))
        yield* p(() => page.getByRole("button", { name: "Log in" }).click())
        yield* heading(page, "Sessions")
        yield* p(() => page.goto(`${baseUrl}/#/sessions/${id}`))
        yield* heading(page, "Session")
        yield* p(() =>
          page
            .getByRole("status")
            .filter({ hasText: /^Connected$/ })
            .waitFor({ timeout: 20_000 })
        )

        const screen = page.getByRole("region", { name: "Terminal of the session" })
        /** The terminal's rows as xterm.js drew them, as text. */
        const rendered = () =>
          screen
            .locator(".xterm-rows > div")
            .allTextContents()
            .then((rows) => rows.map((row) => row.replace(/\u00a0/g, " ").trimEnd()))
        const lines = p(rendered)
        /** Types a command as a user does, key by key, and waits for a line of the shell's output. */
        const run = (command: string, expected: string) =>
          Effect.gen(function* () {
            yield* p(() => page.keyboard.type(command, { delay: 20 }))
            yield* p(() => page.keyboard.press("Enter"))
            yield* until(`${JSON.stringify(command)} to print ${JSON.stringify(expected)}`, async () =>
              (await rendered()).some((line) => line.trim() === expected)
            ).pipe(
              Effect.catchDefect((defect) =>
                Effect.flatMap(lines, (rows) =>
                  Effect.die(new Error(`${String(defect)}; the terminal shows:\n${rows.join("\n")}`))
                )
              )
            )
          })

        yield* p(() => screen.click())
        yield* run("echo $((6*7))", "42")
        const echoed = yield* lines
        assert.isTrue(
          echoed.some((line) => line.endsWith("echo $((6*7))")),
          "the shell echoed the keys as typed"
        )
        yield* checkPage(page, "session-terminal", problems)

        // The PTY has the size the page gave it, and follows the page when the window changes.
        const before = sizes.at(-1)!
        assert.isAbove(before.cols, 20, JSON.stringify(sizes))
        yield* run("stty size", `${before.rows} ${before.cols}`)
        yield* p(() => page.setViewportSize({ width: 900, height: 700 }))
        yield* until("the page to post the new size", async () => {
          const last = sizes.at(-1)!
          return last.cols !== before.cols && last.rows !== before.rows
        })
        // Resizes are posted once the size has settled: let the last one land.
        yield* Effect.sleep("500 millis")
        const after = sizes.at(-1)!
        assert.isBelow(after.cols, before.cols, JSON.stringify(sizes))
        assert.isBelow(after.rows, before.rows, JSON.stringify(sizes))
        assert.strictEqual((yield* lines).length, after.rows, "the page draws as many rows as it sent")
        yield* p(() => screen.click())
        yield* run("stty size", `${after.rows} ${after.cols}`)

        // An ended session shows no terminal.
        yield* p(() => page.getByRole("button", { name: "Delete session" }).click())
        yield* until("the terminal to go", async () => (await screen.count()) === 0)
        yield* checkPage(page, "session-sandbox-ended", problems)

        assert.deepStrictEqual(problems, [], "no serious or critical accessibility violations")
        assert.deepStrictEqual(policyViolations, [], "nothing the Content-Security-Policy refused")
      }).pipe(Effect.scoped),
    120_000
  )
})
