import { assert, describe, it as plain, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as Http from "node:http"
import type * as Net from "node:net"
import { chromium } from "playwright-core"
import puppeteer from "puppeteer-core"
import { unpack } from "../../../src/features/extensions/Extensions.ts"
import * as Zip from "../../../src/platform/files/Zip.ts"
import * as ZipFile from "../../support/ZipFile.ts"
import { isReady, request, signUp, waitForSession } from "../../support/Client.ts"
import * as TestService from "../../support/TestService.ts"

// Extensions of an account's, loaded into its sessions' browsers: the fixture's content script marks
// every page it runs in; a session without it leaves the page as it is.

const text = (value: string) => new TextEncoder().encode(value)

const MANIFEST = {
  manifest_version: 3,
  name: "rbs fixture",
  version: "1.0.0",
  content_scripts: [
    { matches: ["<all_urls>"], js: ["content.js"], run_at: "document_start" },
    { matches: ["<all_urls>"], js: ["title.js"], run_at: "document_end" }
  ]
}

/** The fixture, zipped as a folder is (its files in one top folder). */
const fixture = (manifest: object = MANIFEST) =>
  ZipFile.write([
    { name: "fixture/manifest.json", data: text(JSON.stringify(manifest)) },
    { name: "fixture/title.js", data: text(`document.title = "changed by the extension"`) },
    {
      name: "fixture/content.js",
      data: text(
        `document.documentElement.dataset.rbsFixture = "loaded"; document.title = "changed by the extension"`
      )
    }
  ])

describe("an extension's zip", () => {
  /** Why `read` refused it, or "read". */
  const why = (read: () => Promise<unknown>, ok: string) =>
    read().then(
      () => ok,
      (error: Error) => error.message
    )

  plain("a folder zipped whole is the extension inside it, its manifest read", async () => {
    const unpacked = await unpack(fixture())
    assert.deepStrictEqual(
      unpacked.files.map((file) => file.name),
      ["manifest.json", "title.js", "content.js"]
    )
    assert.deepStrictEqual([unpacked.name, unpacked.version], ["rbs fixture", "1.0.0"])
  })

  plain("a path out of it, a link, a bomb, twice the same file, or not a zip is refused", async () => {
    const limits = { files: 10, bytes: 1024 * 1024 }
    const refusal = (bytes: Uint8Array) => why(() => Zip.read(bytes, limits), "read")
    assert.match(await refusal(ZipFile.write([{ name: "../escape.js", data: text("x") }])), /outside/)
    assert.match(await refusal(ZipFile.write([{ name: "/etc/passwd", data: text("x") }])), /outside/)
    assert.match(await refusal(ZipFile.write([{ name: "a/./b.js", data: text("x") }])), /outside/)
    assert.match(
      await refusal(
        ZipFile.write([
          { name: "a.js", data: text("x") },
          { name: "a.js", data: text("y") }
        ])
      ),
      /twice/
    )
    // A file where a folder of another's path is: it could not be unpacked.
    assert.match(
      await refusal(
        ZipFile.write([
          { name: "lib", data: text("x") },
          { name: "lib/a.js", data: text("y") }
        ])
      ),
      /lib is both a file and a folder/
    )
    assert.match(await refusal(text("not a zip at all, just text")), /not a zip/)
    // A link: a Unix archiver's entry whose mode is a symlink's.
    const link = Buffer.from(ZipFile.write([{ name: "link", data: text("/etc/passwd") }]))
    const central = link.indexOf(Buffer.from([0x50, 0x4b, 0x01, 0x02]))
    link.writeUInt16LE((3 << 8) | 20, central + 4)
    link.writeUInt32LE((0o120777 << 16) >>> 0, central + 38)
    assert.match(await refusal(link), /symbolic link/)
    // A name longer than what is left of the central directory.
    const cut = Buffer.from(ZipFile.write([{ name: "a.js", data: text("x") }]))
    cut.writeUInt16LE(60_000, cut.indexOf(Buffer.from([0x50, 0x4b, 0x01, 0x02])) + 28)
    assert.match(await refusal(cut), /central directory is damaged/)
    // A bomb: 8 MiB of zeros that says it holds 1 KiB, and one that says it holds more than allowed.
    const zeros = new Uint8Array(8 * 1024 * 1024)
    const bomb = Buffer.from(ZipFile.write([{ name: "zeros", data: zeros }]))
    const at = bomb.indexOf(Buffer.from([0x50, 0x4b, 0x01, 0x02]))
    bomb.writeUInt32LE(1024, at + 24)
    assert.match(await refusal(bomb), /size its header says|cannot be inflated/)
    assert.match(await refusal(ZipFile.write([{ name: "zeros", data: zeros }])), /more than 1048576 bytes/)
  })

  plain(
    "a manifest that is not Manifest V3, has no name, or asks for debugger is refused with why",
    async () => {
      const refusal = (manifest: object) => why(() => unpack(fixture(manifest)), "loaded")
      assert.match(await refusal({ ...MANIFEST, manifest_version: 2 }), /manifest_version is not 3/)
      assert.match(await refusal({ ...MANIFEST, name: "" }), /no name/)
      assert.match(await refusal({ ...MANIFEST, version: "one" }), /version/)
      assert.match(await refusal({ ...MANIFEST, permissions: ["debugger"] }), /debugger permission/)
      assert.match(await refusal({ ...MANIFEST, optional_permissions: ["proxy"] }), /proxy permission/)
      assert.match(
        await why(() => unpack(ZipFile.write([{ name: "content.js", data: text("x") }])), "loaded"),
        /no manifest.json/
      )
    }
  )
})

/** A page on loopback that reads what the extension left in it. */
const site = Effect.acquireRelease(
  Effect.promise(
    () =>
      new Promise<{ readonly url: string; readonly server: Http.Server }>((resolve) => {
        const server = Http.createServer((_request, response) => {
          response.writeHead(200, { "content-type": "text/html; charset=utf-8" })
          response.end("<!doctype html><title>untouched</title><p>a page</p>")
        })
        server.listen(0, "127.0.0.1", () =>
          resolve({ url: `http://127.0.0.1:${(server.address() as Net.AddressInfo).port}/`, server })
        )
      })
  ),
  ({ server }) => Effect.promise(() => new Promise<void>((resolve) => server.close(() => resolve())))
)

const upload = (baseUrl: string, key: string, bytes: Uint8Array, name = "fixture.zip") =>
  Effect.promise(async () => {
    const form = new FormData()
    form.append("file", new Blob([bytes]), name)
    const response = await fetch(`${baseUrl}/v1/extensions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}` },
      body: form
    })
    return { status: response.status, json: (await response.json()) as any }
  })

/** What the page reads: the mark the fixture's content script leaves, and its title. */
const mark = () => {
  const page = globalThis as any
  return [page.document.documentElement.dataset.rbsFixture ?? null, page.document.title]
}

layer(TestService.layer({ browserPoolSize: 1 }), { excludeTestServices: true })("extensions", (it) => {
  it.effect(
    "an uploaded extension changes a session's pages, with puppeteer and playwright; a session without it is unchanged",
    () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const { key } = yield* signUp(service.baseUrl)
        const pages = yield* site
        const created = yield* upload(service.baseUrl, key, fixture())
        assert.strictEqual(created.status, 201, JSON.stringify(created.json))
        assert.strictEqual(created.json.object, "extension")
        assert.match(created.json.id, /^ext_[0-9a-f]{32}$/)
        assert.deepStrictEqual(
          [created.json.name, created.json.version, created.json.files],
          ["rbs fixture", "1.0.0", 3]
        )
        const listed = yield* request(service.baseUrl, "GET", "/v1/extensions", { key })
        assert.deepStrictEqual(
          listed.json.data.map((each: any) => each.id),
          [created.json.id]
        )
        const got = yield* request(service.baseUrl, "GET", `/v1/extensions/${created.json.id}`, { key })
        assert.strictEqual(got.json.sha256, created.json.sha256)

        const open = (body: object) =>
          Effect.gen(function* () {
            const answer = yield* request(service.baseUrl, "POST", "/v1/sessions", { key, body })
            assert.strictEqual(answer.status, 201, answer.text)
            return yield* waitForSession(service.baseUrl, key, answer.json.id, isReady)
          })
        const withIt = yield* open({ extensions: [created.json.id] })
        assert.deepStrictEqual(withIt.extensions, [created.json.id])
        const browser = yield* Effect.promise(() =>
          puppeteer.connect({
            browserWSEndpoint: withIt.cdp_url,
            headers: { Authorization: `Bearer ${key}` }
          })
        )
        const page = yield* Effect.promise(() => browser.newPage())
        yield* Effect.promise(() => page.goto(pages.url))
        assert.deepStrictEqual(yield* Effect.promise(() => page.evaluate(mark)), [
          "loaded",
          "changed by the extension"
        ])
        yield* Effect.promise(() => browser.disconnect())

        const playwright = yield* Effect.promise(() =>
          chromium.connectOverCDP(withIt.cdp_url, { headers: { Authorization: `Bearer ${key}` } })
        )
        const other = yield* Effect.promise(() => playwright.contexts()[0]!.newPage())
        yield* Effect.promise(() => other.goto(pages.url))
        assert.deepStrictEqual(yield* Effect.promise(() => other.evaluate(mark)), [
          "loaded",
          "changed by the extension"
        ])
        yield* Effect.promise(() => playwright.close())
        yield* request(service.baseUrl, "DELETE", `/v1/sessions/${withIt.id}`, { key })

        const without = yield* open({})
        assert.deepStrictEqual(without.extensions, [])
        const plainBrowser = yield* Effect.promise(() =>
          puppeteer.connect({
            browserWSEndpoint: without.cdp_url,
            headers: { Authorization: `Bearer ${key}` }
          })
        )
        const plainPage = yield* Effect.promise(() => plainBrowser.newPage())
        yield* Effect.promise(() => plainPage.goto(pages.url))
        assert.deepStrictEqual(yield* Effect.promise(() => plainPage.evaluate(mark)), [null, "untouched"])
        yield* Effect.promise(() => plainBrowser.disconnect())
        yield* request(service.baseUrl, "DELETE", `/v1/sessions/${without.id}`, { key })

        // Deleted, it is gone for later sessions.
        const deleted = yield* request(service.baseUrl, "DELETE", `/v1/extensions/${created.json.id}`, {
          key
        })
        assert.strictEqual(deleted.status, 204)
        const after = yield* request(service.baseUrl, "POST", "/v1/sessions", {
          key,
          body: { extensions: [created.json.id] }
        })
        assert.strictEqual(after.status, 400)
        assert.strictEqual(after.json.error.message, "Invalid value for field: extensions.")
      })
  )

  it.effect(
    "another account's extension, a bad zip, a large one, or extensions on a context session or sandbox are refused",
    () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const owner = yield* signUp(service.baseUrl)
        const stranger = yield* signUp(service.baseUrl)
        const created = yield* upload(service.baseUrl, owner.key, fixture())
        assert.strictEqual(created.status, 201)
        const id = created.json.id as string
        const theirs = yield* request(service.baseUrl, "GET", `/v1/extensions/${id}`, { key: stranger.key })
        assert.strictEqual(theirs.status, 404)
        assert.strictEqual(theirs.json.error.code, "extension_not_found")
        const gone = yield* request(service.baseUrl, "DELETE", `/v1/extensions/${id}`, { key: stranger.key })
        assert.strictEqual(gone.status, 404)
        for (const [key, body] of [
          [stranger.key, { extensions: [id] }],
          [owner.key, { extensions: [id, id] }],
          [owner.key, { extensions: [id], isolation: "context" }],
          [owner.key, { extensions: [id], session_type: "sandbox" }],
          [owner.key, { extensions: ["ext_nope"] }]
        ] as const) {
          const answer = yield* request(service.baseUrl, "POST", "/v1/sessions", { key, body })
          assert.strictEqual(answer.status, 400, JSON.stringify(body))
          assert.strictEqual(
            answer.json.error.message,
            "Invalid value for field: extensions.",
            JSON.stringify(body)
          )
        }
        const v2 = yield* upload(service.baseUrl, owner.key, fixture({ ...MANIFEST, manifest_version: 2 }))
        assert.strictEqual(v2.status, 400)
        assert.strictEqual(v2.json.error.code, "invalid_extension")
        assert.match(v2.json.error.message, /manifest_version is not 3/)
        const notZip = yield* upload(service.baseUrl, owner.key, text("hello"))
        assert.deepStrictEqual([notZip.status, notZip.json.error.code], [400, "invalid_extension"])
        const large = yield* upload(service.baseUrl, owner.key, new Uint8Array(16 * 1024 * 1024 + 1))
        assert.deepStrictEqual([large.status, large.json.error.code], [413, "file_too_large"])
        const listed = yield* request(service.baseUrl, "GET", "/v1/extensions", { key: owner.key })
        assert.strictEqual(listed.json.data.length, 1, "nothing kept of a refused upload")
      })
  )
})
