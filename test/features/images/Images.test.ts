import { assert, describe, it as plain, layer } from "@effect/vitest"
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import * as Crypto from "node:crypto"
import * as FsSync from "node:fs"
import * as Http from "node:http"
import type * as Net from "node:net"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import * as Zlib from "node:zlib"
import * as ImageReference from "../../../src/features/images/ImageReference.ts"
import { isReady, request, signUp, waitForSession } from "../../support/Client.ts"
import { until } from "../../support/Poll.ts"
import * as Registry from "../../support/Registry.ts"
import * as TestService from "../../support/TestService.ts"

// Images pulled through the API from registries run on 127.0.0.1 in the test (Debian's
// docker-registry): one open, one behind htpasswd. The image a sandbox runs is the set-up's
// Debian image with a marker file added, so a command in it proves which image it is.

/** A pull and a sandbox on it take seconds alone, and minutes on a machine busy with other suites. */
const PULL_TIMEOUT = 240_000

const MARKER = `marked-${Crypto.randomBytes(4).toString("hex")}`
const USER = { name: "puller", password: `pw-${Crypto.randomBytes(12).toString("hex")}` }

class Fixtures extends Context.Service<
  Fixtures,
  { readonly open: Registry.Registry; readonly closed: Registry.Registry }
>()("test/images/Fixtures") {}

/** The registries and their images; `marked` (a copy of the set-up's image) only where a sandbox runs it. */
const fixtures = (options: { readonly marked: boolean }) =>
  Layer.effect(
    Fixtures,
    Effect.gen(function* () {
      const open = yield* Registry.start()
      const closed = yield* Registry.start({ user: USER })
      const dir = yield* Effect.acquireRelease(
        Effect.promise(() => Fs.mkdtemp(Path.join(TestService.TEST_ROOT, "runs", "images-"))),
        (dir) => Effect.promise(() => Fs.rm(dir, { recursive: true, force: true }))
      )
      // The set-up's image plus a layer holding the marker.
      const layout = Path.join(dir, "layout")
      if (options.marked)
        yield* Effect.gen(function* () {
          yield* Registry.tool("skopeo", [
            "--insecure-policy",
            "copy",
            "--quiet",
            `oci:${TestService.IMAGES_DIR}/oci:debian`,
            `oci:${layout}:marked`
          ])
          yield* Effect.promise(() => Fs.writeFile(Path.join(dir, "marker"), `${MARKER}\n`, { mode: 0o644 }))
          yield* Registry.tool("umoci", [
            "insert",
            "--image",
            `${layout}:marked`,
            Path.join(dir, "marker"),
            "/etc/rbs-marker"
          ])
          yield* Registry.push(open, `oci:${layout}:marked`, "acme/marked:v1")
        })
      // A small image of 3 MB that will not compress: past a 1 MB cap, and enough for a private pull.
      const tiny = Path.join(dir, "tiny")
      yield* Registry.tool("umoci", ["init", "--layout", tiny])
      yield* Registry.tool("umoci", ["new", "--image", `${tiny}:tiny`])
      yield* Effect.promise(() =>
        Fs.writeFile(Path.join(dir, "random.bin"), Crypto.randomBytes(3 * 1024 * 1024))
      )
      yield* Registry.tool("umoci", [
        "insert",
        "--image",
        `${tiny}:tiny`,
        Path.join(dir, "random.bin"),
        "/random.bin"
      ])
      yield* Registry.push(open, `oci:${tiny}:tiny`, "acme/big:v1")
      // The same, as Docker's schema 2 (its media types Docker's, not OCI's).
      yield* Registry.tool("skopeo", [
        "--insecure-policy",
        "copy",
        "--quiet",
        "--format",
        "v2s2",
        "--dest-tls-verify=false",
        `oci:${tiny}:tiny`,
        `docker://${open.address}/acme/docker:v1`
      ])
      // 64 MiB of zeros: a layer of some 64 KiB as stored, past a cap on what it unpacks to.
      yield* Effect.promise(() => Fs.writeFile(Path.join(dir, "zeros.bin"), Buffer.alloc(64 * 1024 * 1024)))
      yield* Registry.tool("umoci", ["new", "--image", `${tiny}:zeros`])
      yield* Registry.tool("umoci", [
        "insert",
        "--image",
        `${tiny}:zeros`,
        Path.join(dir, "zeros.bin"),
        "/zeros.bin"
      ])
      yield* Registry.push(open, `oci:${tiny}:zeros`, "acme/zeros:v1")
      yield* Registry.push(closed, `oci:${tiny}:tiny`, "team/secret:v1", USER)
      return { open, closed }
    })
  )

const service = TestService.layer({
  // The registries are on loopback, which the SSRF guard refuses unless allowed, as webhooks' receivers.
  registryAllowCidrs: "127.0.0.1/32",
  sandbox: { poolSize: 0 }
})

/** A service whose cap is 1 MB. */
const smallCap = TestService.layer({
  registryAllowCidrs: "127.0.0.1/32",
  imageMaxMb: 1,
  imageMaxUnpackedMb: 16,
  sandbox: { poolSize: 0 }
})

const api =
  (baseUrl: string) =>
  (method: string, path: string, options: Parameters<typeof request>[3] = {}) =>
    request(baseUrl, method, path, options)

/** Polls the image until its pull has ended. */
const pulled = (baseUrl: string, key: string, id: string) =>
  until(
    Effect.map(request(baseUrl, "GET", `/v1/images/${id}`, { key }), (response) => response.json),
    (image) => image?.status !== "pulling",
    120_000
  )

/** The rows' sealed credentials, straight from the table. */
const sealedOf = (databaseUrl: string, id: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ readonly credentials_sealed: string | null }>`
      SELECT credentials_sealed FROM images WHERE id = ${id}`
    return rows[0]?.credentials_sealed ?? null
  }).pipe(
    Effect.provide(PgClient.layer({ url: Redacted.make(databaseUrl), maxConnections: 1 })),
    Effect.orDie
  )

describe("an image reference", () => {
  plain("is docker:// (or bare) to a registry, normalized; local transports and junk are refused", () => {
    assert.deepInclude(ImageReference.parse("docker://127.0.0.1:5000/acme/app:v1"), {
      registry: "127.0.0.1:5000",
      host: "127.0.0.1",
      port: 5000,
      repository: "acme/app",
      pin: ":v1",
      normalized: "docker://127.0.0.1:5000/acme/app:v1"
    })
    assert.deepInclude(ImageReference.parse("alpine"), {
      normalized: "docker://docker.io/library/alpine:latest"
    })
    assert.deepInclude(ImageReference.parse(`ghcr.io/a/b@sha256:${"a".repeat(64)}`), {
      normalized: `docker://ghcr.io/a/b@sha256:${"a".repeat(64)}`
    })
    for (const refused of [
      "oci:/work/.data/images/oci:debian",
      "dir:/etc",
      "docker-archive:/tmp/x.tar",
      "oci-archive:/tmp/x.tar",
      "docker-daemon:alpine:latest",
      "containers-storage:alpine",
      "http://registry.example/a",
      "docker://127.0.0.1:5000/../etc",
      "docker://127.0.0.1:5000/Acme/app",
      "docker://user:pw@127.0.0.1:5000/a",
      "docker://127.0.0.1:5000/a b",
      ""
    ])
      assert.property(ImageReference.parse(refused), "refused", refused)
    assert.strictEqual(ImageReference.defaultName(ImageReference.parse("a/web:1.2") as any), "web-1.2")
    assert.strictEqual(ImageReference.defaultName(ImageReference.parse("a/web") as any), "web")
  })
})

layer(Layer.mergeAll(service, fixtures({ marked: true })), { excludeTestServices: true, timeout: 300_000 })(
  "images through the API",
  (it) => {
    it.effect(
      "an image pulled from a registry runs in a sandbox, for its account alone, until deleted",
      () =>
        Effect.gen(function* () {
          const svc = yield* TestService.TestService
          const { open } = yield* Fixtures
          const call = api(svc.baseUrl)
          const owner = yield* signUp(svc.baseUrl)
          const other = yield* signUp(svc.baseUrl)

          const created = yield* call("POST", "/v1/images", {
            key: owner.key,
            body: { reference: `docker://${open.address}/acme/marked:v1`, name: "marked" }
          })
          assert.strictEqual(created.status, 202, created.text)
          assert.include(created.json, { object: "image", name: "marked", status: "pulling", digest: null })
          const id = created.json.id as string
          const image = yield* pulled(svc.baseUrl, owner.key, id)
          assert.strictEqual(image.status, "ready", JSON.stringify(image))
          assert.match(image.digest, /^sha256:[0-9a-f]{64}$/)
          assert.isAbove(image.bytes, 1_000_000)
          assert.isNull(image.error)
          // Kept in the blob store, whole, for every node.
          assert.isTrue(FsSync.existsSync(Path.join(svc.config.dataDir, "blobs", "images", `${id}.tar`)))

          const listed = yield* call("GET", "/v1/images?limit=1", { key: owner.key })
          assert.strictEqual(listed.status, 200, listed.text)
          assert.deepStrictEqual(
            listed.json.data.map((each: any) => each.id),
            [id]
          )
          assert.include(listed.json, { has_more: false, next_cursor: null })
          const again = yield* call("POST", "/v1/images", {
            key: owner.key,
            body: { reference: `${open.address}/acme/marked:v1`, name: "marked" }
          })
          assert.strictEqual(again.status, 409, again.text)
          assert.strictEqual(again.json.error.code, "image_exists")

          // A sandbox of it runs that very image: the marker is there.
          const session = yield* call("POST", "/v1/sessions", {
            key: owner.key,
            body: { session_type: "sandbox", image: "marked" }
          })
          assert.strictEqual(session.status, 201, session.text)
          const ready = yield* waitForSession(svc.baseUrl, owner.key, session.json.id, isReady, 120_000)
          assert.strictEqual(ready.image, "marked")
          const exec = yield* call("POST", `/v1/sessions/${ready.id}/exec`, {
            key: owner.key,
            body: { command: "cat /etc/rbs-marker && . /etc/os-release && echo $ID" }
          })
          assert.strictEqual(exec.status, 200, exec.text)
          assert.strictEqual(exec.json.stdout, `${MARKER}\ndebian\n`)
          yield* call("DELETE", `/v1/sessions/${ready.id}`, { key: owner.key })
          yield* waitForSession(svc.baseUrl, owner.key, ready.id, (s) => s.status === "closed")
          // The node's own image of the default runs for a session naming none.
          const plainSession = yield* call("POST", "/v1/sessions", {
            key: owner.key,
            body: { session_type: "sandbox" }
          })
          const plainReady = yield* waitForSession(
            svc.baseUrl,
            owner.key,
            plainSession.json.id,
            isReady,
            60_000
          )
          const plainExec = yield* call("POST", `/v1/sessions/${plainReady.id}/exec`, {
            key: owner.key,
            body: { command: "test -e /etc/rbs-marker && echo marked || echo plain" }
          })
          assert.strictEqual(plainExec.json.stdout, "plain\n")
          yield* call("DELETE", `/v1/sessions/${plainReady.id}`, { key: owner.key })

          // Another account neither sees nor runs it.
          const seen = yield* call("GET", `/v1/images/${id}`, { key: other.key })
          assert.strictEqual(seen.status, 404)
          assert.strictEqual(seen.json.error.code, "image_not_found")
          const otherList = yield* call("GET", "/v1/images", { key: other.key })
          assert.deepStrictEqual(otherList.json.data, [])
          const otherRun = yield* call("POST", "/v1/sessions", {
            key: other.key,
            body: { session_type: "sandbox", image: "marked" }
          })
          assert.strictEqual(otherRun.status, 400, otherRun.text)
          assert.strictEqual(otherRun.json.error.message, "Invalid value for field: image.")
          const otherDelete = yield* call("DELETE", `/v1/images/${id}`, { key: other.key })
          assert.strictEqual(otherDelete.status, 404)

          // Deleted: gone from the API and the blob store; a session can no longer name it.
          const deleted = yield* call("DELETE", `/v1/images/${id}`, { key: owner.key })
          assert.strictEqual(deleted.status, 204, deleted.text)
          assert.strictEqual((yield* call("GET", `/v1/images/${id}`, { key: owner.key })).status, 404)
          assert.isFalse(FsSync.existsSync(Path.join(svc.config.dataDir, "blobs", "images", `${id}.tar`)))
          const after = yield* call("POST", "/v1/sessions", {
            key: owner.key,
            body: { session_type: "sandbox", image: "marked" }
          })
          assert.strictEqual(after.status, 400, after.text)

          const audit = yield* call("GET", "/v1/audit/events?limit=100", { key: owner.key })
          const actions = (audit.json?.data ?? []).map((event: any) => event.action)
          assert.includeMembers(actions, ["image.created", "image.deleted"])
        }),
      PULL_TIMEOUT
    )

    it.effect(
      "a private registry pulls with its credentials, never shown, and fails clearly without",
      () =>
        Effect.gen(function* () {
          const svc = yield* TestService.TestService
          const { closed } = yield* Fixtures
          const call = api(svc.baseUrl)
          const owner = yield* signUp(svc.baseUrl)
          const reference = `docker://${closed.address}/team/secret:v1`

          const withCreds = yield* call("POST", "/v1/images", {
            key: owner.key,
            body: { reference, name: "secret", credentials: { username: USER.name, password: USER.password } }
          })
          assert.strictEqual(withCreds.status, 202, withCreds.text)
          // Sealed at rest while it pulls: never the password itself.
          const sealed = yield* sealedOf(svc.config.databaseUrl, withCreds.json.id)
          if (sealed !== null) {
            assert.match(sealed, /^v1:/)
            assert.notInclude(sealed, USER.password)
          }
          const ready = yield* pulled(svc.baseUrl, owner.key, withCreds.json.id)
          assert.strictEqual(ready.status, "ready", JSON.stringify(ready))
          assert.isNull(yield* sealedOf(svc.config.databaseUrl, withCreds.json.id))

          const without = yield* call("POST", "/v1/images", {
            key: owner.key,
            body: { reference, name: "anon" }
          })
          assert.strictEqual(without.status, 202, without.text)
          const refused = yield* pulled(svc.baseUrl, owner.key, without.json.id)
          assert.strictEqual(refused.status, "failed")
          assert.strictEqual(refused.error.code, "registry_unauthorized", JSON.stringify(refused))

          const wrong = yield* call("POST", "/v1/images", {
            key: owner.key,
            body: {
              reference,
              name: "wrong",
              credentials: { username: USER.name, password: `${USER.password}x` }
            }
          })
          const wrongEnd = yield* pulled(svc.baseUrl, owner.key, wrong.json.id)
          assert.strictEqual(wrongEnd.error.code, "registry_unauthorized", JSON.stringify(wrongEnd))
          assert.isNull(yield* sealedOf(svc.config.databaseUrl, wrong.json.id))

          // No answer, list or audit record carries the password (nor the username with it).
          const answers = [
            withCreds.text,
            wrong.text,
            (yield* call("GET", "/v1/images", { key: owner.key })).text,
            (yield* call("GET", `/v1/images/${withCreds.json.id}`, { key: owner.key })).text,
            JSON.stringify(wrongEnd),
            (yield* call("GET", "/v1/audit/events?limit=100", { key: owner.key })).text
          ]
          for (const answer of answers) {
            assert.notInclude(answer, USER.password)
            assert.notInclude(answer, "credentials")
          }
        }),
      PULL_TIMEOUT
    )

    it.effect(
      "a Docker schema 2 image is pulled, recorded by the registry's digest, kept as an OCI layout umoci unpacks",
      () =>
        Effect.gen(function* () {
          const svc = yield* TestService.TestService
          const { open } = yield* Fixtures
          const owner = yield* signUp(svc.baseUrl)
          const created = yield* request(svc.baseUrl, "POST", "/v1/images", {
            key: owner.key,
            body: { reference: `docker://${open.address}/acme/docker:v1` }
          })
          assert.strictEqual(created.status, 202, created.text)
          const image = yield* pulled(svc.baseUrl, owner.key, created.json.id)
          assert.strictEqual(image.status, "ready", JSON.stringify(image))
          const served = yield* Effect.promise(() =>
            fetch(`http://${open.address}/v2/acme/docker/manifests/v1`, {
              headers: { accept: "application/vnd.docker.distribution.manifest.v2+json" }
            })
          )
          assert.strictEqual(
            JSON.parse(yield* Effect.promise(() => served.text())).mediaType,
            "application/vnd.docker.distribution.manifest.v2+json"
          )
          assert.strictEqual(image.digest, served.headers.get("docker-content-digest"))
          // The archive is an OCI layout, its layers OCI's, which umoci unpacks.
          const dir = yield* Effect.acquireRelease(
            Effect.promise(() => Fs.mkdtemp(Path.join(TestService.TEST_ROOT, "runs", "v2s2-"))),
            (dir) => Effect.promise(() => Fs.rm(dir, { recursive: true, force: true }))
          )
          const layout = Path.join(dir, "layout")
          yield* Effect.promise(() => Fs.mkdir(layout))
          yield* Registry.tool("tar", [
            "-C",
            layout,
            "-xf",
            Path.join(svc.config.dataDir, "blobs", "images", `${created.json.id}.tar`)
          ])
          const index = JSON.parse(
            yield* Effect.promise(() => Fs.readFile(Path.join(layout, "index.json"), "utf8"))
          )
          const manifest = JSON.parse(
            yield* Effect.promise(() =>
              Fs.readFile(Path.join(layout, "blobs", ...index.manifests[0].digest.split(":")), "utf8")
            )
          )
          assert.strictEqual(manifest.mediaType, "application/vnd.oci.image.manifest.v1+json")
          yield* Registry.tool("umoci", ["unpack", "--image", `${layout}:image`, Path.join(dir, "bundle")])
          const stat = yield* Effect.promise(() => Fs.stat(Path.join(dir, "bundle", "rootfs", "random.bin")))
          assert.strictEqual(stat.size, 3 * 1024 * 1024)
        }).pipe(Effect.scoped),
      PULL_TIMEOUT
    )

    it.effect("local paths, other transports and refused registries are 400, with nothing kept", () =>
      Effect.gen(function* () {
        const svc = yield* TestService.TestService
        const call = api(svc.baseUrl)
        const owner = yield* signUp(svc.baseUrl)
        for (const reference of [
          `oci:${TestService.IMAGES_DIR}/oci:debian`,
          "dir:/etc",
          "docker-archive:/etc/passwd",
          "oci-archive:/tmp/image.tar",
          "containers-storage:debian",
          // The SSRF guard: the metadata address, a private network (only 127.0.0.1/32 is allowed here).
          "docker://169.254.169.254/latest/meta-data:v1",
          "docker://10.0.0.1:5000/acme/app:v1"
        ]) {
          const refused = yield* call("POST", "/v1/images", {
            key: owner.key,
            body: { reference, name: "x" }
          })
          assert.strictEqual(refused.status, 400, `${reference}: ${refused.text}`)
          assert.strictEqual(refused.json.error.code, "invalid_image_reference", reference)
        }
        const listed = yield* call("GET", "/v1/images", { key: owner.key })
        assert.deepStrictEqual(listed.json.data, [])
        // A key scoped without images.write may not pull; with images.read it lists.
        const scoped = yield* call("POST", "/v1/keys", {
          cookie: owner.cookie,
          body: { name: "reader", scopes: ["images.read"] }
        })
        assert.strictEqual(scoped.status, 201, scoped.text)
        const forbidden = yield* call("POST", "/v1/images", {
          key: scoped.json.secret,
          body: { reference: "docker://127.0.0.1:1/a:b" }
        })
        assert.strictEqual(forbidden.status, 403, forbidden.text)
        assert.strictEqual((yield* call("GET", "/v1/images", { key: scoped.json.secret })).status, 200)
      })
    )
  }
)

/**
 * A registry that serves a manifest, then sends every blob to the cloud metadata address (a
 * redirect to blob storage, as registries do): the registry client must refuse the hop, without
 * any connection to that address being made.
 */
const hostileRegistry = Effect.acquireRelease(
  Effect.promise(
    () =>
      new Promise<{ readonly server: Http.Server; readonly port: number; readonly blobs: Array<string> }>(
        (listening) => {
          const config = Buffer.from(
            JSON.stringify({ architecture: "amd64", os: "linux", rootfs: { type: "layers", diff_ids: [] } })
          )
          const digestOf = (bytes: Buffer) =>
            `sha256:${Crypto.createHash("sha256").update(bytes).digest("hex")}`
          const manifest = Buffer.from(
            JSON.stringify({
              schemaVersion: 2,
              mediaType: "application/vnd.oci.image.manifest.v1+json",
              config: {
                mediaType: "application/vnd.oci.image.config.v1+json",
                digest: digestOf(config),
                size: config.length
              },
              layers: []
            })
          )
          const blobs: Array<string> = []
          const server = Http.createServer((request, response) => {
            const url = request.url ?? ""
            if (url === "/v2/" || url === "/v2")
              return response.writeHead(200, { "content-type": "application/json" }).end("{}")
            if (url.startsWith("/v2/evil/manifests/"))
              return response
                .writeHead(200, {
                  "content-type": "application/vnd.oci.image.manifest.v1+json",
                  "docker-content-digest": digestOf(manifest),
                  "content-length": String(manifest.length)
                })
                .end(request.method === "HEAD" ? undefined : manifest)
            if (url.startsWith("/v2/evil/blobs/")) {
              blobs.push(url)
              return response
                .writeHead(307, { location: "http://169.254.169.254/latest/meta-data/iam" })
                .end()
            }
            response.writeHead(404).end()
          })
          server.listen(0, "127.0.0.1", () =>
            listening({ server, port: (server.address() as Net.AddressInfo).port, blobs })
          )
        }
      )
  ),
  ({ server }) => Effect.promise(() => new Promise<void>((closed) => server.close(() => closed())))
)

layer(service, { excludeTestServices: true, timeout: 120_000 })("a registry's redirects", (it) => {
  it.effect(
    "a blob sent to the metadata address is refused by the registry client's guard; the pull fails saying so",
    () =>
      Effect.gen(function* () {
        const svc = yield* TestService.TestService
        const registry = yield* hostileRegistry
        const owner = yield* signUp(svc.baseUrl)
        const created = yield* request(svc.baseUrl, "POST", "/v1/images", {
          key: owner.key,
          body: { reference: `docker://127.0.0.1:${registry.port}/evil:latest`, name: "evil" }
        })
        assert.strictEqual(created.status, 202, created.text)
        const image = yield* pulled(svc.baseUrl, owner.key, created.json.id)
        assert.strictEqual(image.status, "failed", JSON.stringify(image))
        assert.strictEqual(image.error.code, "image_pull_failed")
        assert.include(image.error.message, "169.254.169.254: link_local", "the guard's refusal, named")
        assert.isAbove(registry.blobs.length, 0, "the client asked for the blob and was redirected")
      }).pipe(Effect.scoped),
    PULL_TIMEOUT
  )
})

layer(Layer.mergeAll(smallCap, fixtures({ marked: false })), { excludeTestServices: true, timeout: 120_000 })(
  "IMAGE_MAX_MB",
  (it) => {
    it.effect(
      "an image past IMAGE_MAX_MB fails as image_too_large, and leaves nothing behind",
      () =>
        Effect.gen(function* () {
          const svc = yield* TestService.TestService
          const { open } = yield* Fixtures
          const call = api(svc.baseUrl)
          const owner = yield* signUp(svc.baseUrl)
          const created = yield* call("POST", "/v1/images", {
            key: owner.key,
            body: { reference: `docker://${open.address}/acme/big:v1` }
          })
          assert.strictEqual(created.status, 202, created.text)
          assert.strictEqual(created.json.name, "big-v1")
          const failed = yield* pulled(svc.baseUrl, owner.key, created.json.id)
          assert.strictEqual(failed.status, "failed")
          assert.strictEqual(failed.error.code, "image_too_large")
          assert.match(failed.error.message, /IMAGE_MAX_MB \(1 MB\)/)
          assert.isNull(failed.digest)
          assert.isFalse(
            FsSync.existsSync(Path.join(svc.config.dataDir, "blobs", "images", `${created.json.id}.tar`))
          )
          const tmp = Path.join(svc.config.dataDir, "tmp")
          const left = FsSync.existsSync(tmp)
            ? FsSync.readdirSync(tmp).filter((name) => name.startsWith("image-"))
            : []
          assert.deepStrictEqual(left, [])
          const session = yield* call("POST", "/v1/sessions", {
            key: owner.key,
            body: { session_type: "sandbox", image: "big-v1" }
          })
          assert.strictEqual(session.status, 400, session.text)

          // Small as stored, large unpacked: refused before it is kept, so no node unpacks it.
          const bomb = yield* call("POST", "/v1/images", {
            key: owner.key,
            body: { reference: `docker://${open.address}/acme/zeros:v1` }
          })
          assert.strictEqual(bomb.status, 202, bomb.text)
          const refused = yield* pulled(svc.baseUrl, owner.key, bomb.json.id)
          assert.strictEqual(refused.status, "failed", JSON.stringify(refused))
          assert.strictEqual(refused.error.code, "image_too_large")
          assert.match(
            refused.error.message,
            /unpacks to more than 16 MB, past this service's IMAGE_MAX_UNPACKED_MB/
          )
          assert.isFalse(
            FsSync.existsSync(Path.join(svc.config.dataDir, "blobs", "images", `${bomb.json.id}.tar`))
          )
        }),
      PULL_TIMEOUT
    )
  }
)

/** A tar of one file, by hand (ustar): a layer small enough to write in the test. */
const tarOf = (name: string, content: Buffer) => {
  const header = Buffer.alloc(512)
  header.write(name, 0)
  header.write("0000644\0", 100)
  header.write("0000000\0", 108)
  header.write("0000000\0", 116)
  header.write(`${content.length.toString(8).padStart(11, "0")}\0`, 124)
  header.write("00000000000\0", 136)
  header.write("        ", 148)
  header.write("0", 156)
  header.write("ustar\u000000", 257)
  let sum = 0
  for (const byte of header) sum += byte
  header.write(`${sum.toString(8).padStart(6, "0")}\0 `, 148)
  return Buffer.concat([
    header,
    content,
    Buffer.alloc((512 - (content.length % 512)) % 512),
    Buffer.alloc(1024)
  ])
}

const digestOf = (bytes: Buffer) => `sha256:${Crypto.createHash("sha256").update(bytes).digest("hex")}`

/** A tiny OCI image: its manifest, and its config and one layer by digest. */
const tinyImage = () => {
  const tar = tarOf("hello.txt", Buffer.from("hello\n"))
  const layer = Zlib.gzipSync(tar)
  const config = Buffer.from(
    JSON.stringify({
      architecture: "amd64",
      os: "linux",
      config: {},
      rootfs: { type: "layers", diff_ids: [digestOf(tar)] }
    })
  )
  const manifest = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: "application/vnd.oci.image.manifest.v1+json",
      config: {
        mediaType: "application/vnd.oci.image.config.v1+json",
        digest: digestOf(config),
        size: config.length
      },
      layers: [
        {
          mediaType: "application/vnd.oci.image.layer.v1.tar+gzip",
          digest: digestOf(layer),
          size: layer.length
        }
      ]
    })
  )
  return {
    manifest,
    config: digestOf(config),
    layer: digestOf(layer),
    blobs: new Map([
      [digestOf(config), config],
      [digestOf(layer), layer]
    ])
  }
}

interface Stub {
  readonly port: number
  /** Every request's method, URL and Authorization header, as received. */
  readonly requests: Array<{ readonly url: string; readonly authorization: string | undefined }>
}

/** A Node HTTP server on `host` for the scope, answering with `handle`. */
const stub = (host: string, handle: (request: Http.IncomingMessage, response: Http.ServerResponse) => void) =>
  Effect.acquireRelease(
    Effect.promise(
      () =>
        new Promise<Stub & { readonly server: Http.Server }>((listening) => {
          const requests: Stub["requests"] = []
          const server = Http.createServer((request, response) => {
            requests.push({ url: request.url ?? "", authorization: request.headers.authorization })
            handle(request, response)
          })
          server.listen(0, host, () =>
            listening({ server, port: (server.address() as Net.AddressInfo).port, requests })
          )
        })
    ),
    ({ server }) =>
      Effect.promise(
        () =>
          new Promise<void>((closed) => {
            server.closeAllConnections()
            server.close(() => closed())
          })
      )
  )

/** Answers `/v2/`, the manifest of any tag and the image's blobs; false for anything else. */
const serveImage = (
  image: ReturnType<typeof tinyImage>,
  request: Http.IncomingMessage,
  response: Http.ServerResponse
) => {
  const url = request.url ?? ""
  if (url === "/v2/") {
    response.writeHead(200, { "content-type": "application/json" }).end("{}")
    return true
  }
  if (/^\/v2\/[a-z/]+\/manifests\//.test(url)) {
    response
      .writeHead(200, {
        "content-type": "application/vnd.oci.image.manifest.v1+json",
        "docker-content-digest": digestOf(image.manifest)
      })
      .end(image.manifest)
    return true
  }
  const blob = /^\/v2\/[a-z/]+\/blobs\/(sha256:[0-9a-f]{64})$/.exec(url)
  const bytes = blob === null ? undefined : image.blobs.get(blob[1]!)
  if (bytes !== undefined) {
    response.writeHead(200, { "content-type": "application/octet-stream" }).end(bytes)
    return true
  }
  return false
}

/** Only 127.0.0.2 is a registry here: 127.0.0.1 stays loopback, which the guard refuses. */
const stubService = TestService.layer({ registryAllowCidrs: "127.0.0.2/32", sandbox: { poolSize: 0 } })

const pullFrom = (baseUrl: string, reference: string) =>
  Effect.gen(function* () {
    const owner = yield* signUp(baseUrl)
    const created = yield* request(baseUrl, "POST", "/v1/images", { key: owner.key, body: { reference } })
    assert.strictEqual(created.status, 202, created.text)
    return yield* pulled(baseUrl, owner.key, created.json.id)
  })

layer(stubService, { excludeTestServices: true, timeout: 120_000 })("the service's registry client", (it) => {
  it.effect(
    "a blob sent to a loopback port is refused before any connection: the port never hears of it",
    () =>
      Effect.gen(function* () {
        const svc = yield* TestService.TestService
        const image = tinyImage()
        // What a tenant would scan for: a server on the node's loopback.
        const victim = yield* stub("127.0.0.1", (_, response) => response.writeHead(200).end("private"))
        const hostile = yield* stub("127.0.0.2", (request, response) => {
          if ((request.url ?? "").includes("/blobs/"))
            return response.writeHead(307, { location: `http://127.0.0.1:${victim.port}/x` }).end()
          if (!serveImage(image, request, response)) response.writeHead(404).end()
        })
        const failed = yield* pullFrom(svc.baseUrl, `docker://127.0.0.2:${hostile.port}/evil:v1`)
        assert.strictEqual(failed.status, "failed", JSON.stringify(failed))
        assert.strictEqual(failed.error.code, "image_pull_failed")
        assert.include(failed.error.message, "127.0.0.1: loopback")
        assert.notInclude(failed.error.message, "private")
        assert.isAbove(hostile.requests.filter((each) => each.url.includes("/blobs/")).length, 0)
        assert.deepStrictEqual(victim.requests, [], "no request reached the loopback server")
      }).pipe(Effect.scoped),
    PULL_TIMEOUT
  )

  it.effect(
    "redirects are followed up to 5 hops, a longer chain is refused; a blob not matching its digest fails",
    () =>
      Effect.gen(function* () {
        const svc = yield* TestService.TestService
        const image = tinyImage()
        // The config after 5 hops, the layer never.
        const chain = yield* stub("127.0.0.2", (request, response) => {
          const url = request.url ?? ""
          const hop = /^\/hop\/(\d+)\/(.*)$/.exec(url)
          if (hop !== null) {
            const n = Number(hop[1])
            const digest = hop[2]!
            if (digest === image.config && n === 5)
              return response.writeHead(200).end(image.blobs.get(image.config))
            return response.writeHead(302, { location: `/hop/${n + 1}/${digest}` }).end()
          }
          const blob = /\/blobs\/(sha256:[0-9a-f]{64})$/.exec(url)
          if (blob !== null) return response.writeHead(307, { location: `/hop/1/${blob[1]}` }).end()
          if (!serveImage(image, request, response)) response.writeHead(404).end()
        })
        const long = yield* pullFrom(svc.baseUrl, `docker://127.0.0.2:${chain.port}/chain:v1`)
        assert.strictEqual(long.status, "failed", JSON.stringify(long))
        assert.strictEqual(long.error.code, "image_pull_failed")
        assert.include(long.error.message, "redirected the pull more than 5 times")
        assert.isTrue(chain.requests.some((each) => each.url === `/hop/5/${image.config}`))
        assert.isTrue(chain.requests.some((each) => each.url === `/hop/5/${image.layer}`))
        assert.isFalse(chain.requests.some((each) => each.url.startsWith("/hop/6/")))

        const forged = yield* stub("127.0.0.2", (request, response) => {
          if ((request.url ?? "").endsWith(image.layer))
            return response.writeHead(200).end(Zlib.gzipSync(tarOf("other.txt", Buffer.from("other\n"))))
          if (!serveImage(image, request, response)) response.writeHead(404).end()
        })
        const mismatch = yield* pullFrom(svc.baseUrl, `docker://127.0.0.2:${forged.port}/forged:v1`)
        assert.strictEqual(mismatch.status, "failed", JSON.stringify(mismatch))
        assert.strictEqual(mismatch.error.code, "image_pull_failed")
        assert.include(mismatch.error.message, "does not match its digest")
      }).pipe(Effect.scoped),
    PULL_TIMEOUT
  )

  it.effect(
    "a Bearer challenge is answered from the token service, credentials going there alone; its realm is guarded too",
    () =>
      Effect.gen(function* () {
        const svc = yield* TestService.TestService
        const image = tinyImage()
        const token = `tok-${Crypto.randomBytes(8).toString("hex")}`
        const basic = `Basic ${Buffer.from(`${USER.name}:${USER.password}`).toString("base64")}`
        const tokens = yield* stub("127.0.0.2", (request, response) => {
          const url = new URL(request.url ?? "", "http://x")
          if (
            url.pathname === "/token" &&
            url.searchParams.get("service") === "x" &&
            url.searchParams.get("scope") === "repository:acme/app:pull" &&
            request.headers.authorization === basic
          )
            return response
              .writeHead(200, { "content-type": "application/json" })
              .end(JSON.stringify({ token }))
          response.writeHead(401).end()
        })
        const guarded = (realm: string) => (request: Http.IncomingMessage, response: Http.ServerResponse) => {
          if (request.headers.authorization !== `Bearer ${token}`)
            return response
              .writeHead(401, {
                "www-authenticate": `Bearer realm="${realm}",service="x",scope="repository:acme/app:pull"`
              })
              .end()
          if (!serveImage(image, request, response)) response.writeHead(404).end()
        }
        const registry = yield* stub("127.0.0.2", guarded(`http://127.0.0.2:${tokens.port}/token`))
        const owner = yield* signUp(svc.baseUrl)
        const created = yield* request(svc.baseUrl, "POST", "/v1/images", {
          key: owner.key,
          body: {
            reference: `docker://127.0.0.2:${registry.port}/acme/app:v1`,
            credentials: { username: USER.name, password: USER.password }
          }
        })
        assert.strictEqual(created.status, 202, created.text)
        const ready = yield* pulled(svc.baseUrl, owner.key, created.json.id)
        assert.strictEqual(ready.status, "ready", JSON.stringify(ready))
        assert.strictEqual(ready.digest, digestOf(image.manifest))
        assert.isTrue(registry.requests.some((each) => each.url === `/v2/acme/app/blobs/${image.layer}`))
        assert.isFalse(
          registry.requests.some((each) => each.authorization?.startsWith("Basic") === true),
          "the password went to the token service alone"
        )
        // Without credentials: the token service refuses, the pull says so.
        const anonymous = yield* pullFrom(svc.baseUrl, `docker://127.0.0.2:${registry.port}/acme/app:v1`)
        assert.strictEqual(anonymous.error?.code, "registry_unauthorized", JSON.stringify(anonymous))

        // A realm on loopback is refused as any hop, before a connection.
        const loopTokens = yield* stub("127.0.0.1", (_, response) => response.writeHead(200).end("{}"))
        const sneaky = yield* stub("127.0.0.2", guarded(`http://127.0.0.1:${loopTokens.port}/token`))
        const refused = yield* pullFrom(svc.baseUrl, `docker://127.0.0.2:${sneaky.port}/acme/app:v1`)
        assert.strictEqual(refused.status, "failed", JSON.stringify(refused))
        assert.strictEqual(refused.error.code, "image_pull_failed")
        assert.include(refused.error.message, "127.0.0.1: loopback")
        assert.deepStrictEqual(loopTokens.requests, [])
      }).pipe(Effect.scoped),
    PULL_TIMEOUT
  )
})
