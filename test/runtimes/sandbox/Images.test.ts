import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { afterAll } from "vitest"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { request, signUp } from "../../support/Client.ts"
import { IMAGES_DIR } from "../../support/Images.ts"
import { rbs } from "../../support/ServiceProcess.ts"
import * as TestService from "../../support/TestService.ts"

// `rbs images import` and `rbs images list` on a store of this file's own: the set-up's default
// image is shared into it (its blobs hard-linked, its unpacked rootfs linked), so nothing an
// operator imports here reaches the store the other tests use.
const ROOT = Path.resolve(".test-data", `images-${process.pid}`)
const STORE = Path.join(ROOT, "store")

const sh = (command: string, args: ReadonlyArray<string>, cwd?: string) =>
  ChildProcess.execFileSync(command, args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] })

/** A store holding the set-up's `debian` without copying it. */
const shareDefaultImage = () => {
  Fs.rmSync(ROOT, { recursive: true, force: true })
  Fs.mkdirSync(Path.join(STORE, "unpacked"), { recursive: true })
  sh("cp", ["-al", Path.join(IMAGES_DIR, "oci"), Path.join(STORE, "oci")])
  // skopeo rewrites the index of the layout it imports into: this store's own copy.
  Fs.rmSync(Path.join(STORE, "oci", "index.json"))
  Fs.copyFileSync(Path.join(IMAGES_DIR, "oci", "index.json"), Path.join(STORE, "oci", "index.json"))
  for (const name of Fs.readdirSync(Path.join(IMAGES_DIR, "unpacked"))) {
    if (!name.includes(".tmp-")) {
      Fs.symlinkSync(Path.join(IMAGES_DIR, "unpacked", name), Path.join(STORE, "unpacked", name))
    }
  }
}

/**
 * An image as an operator might bring one: a root filesystem with a single
 * static program, packed by umoci as an OCI layout (`tiny:v1`), and the
 * same as a docker-archive tarball (what `docker save` writes).
 */
const buildTinyImage = () => {
  const work = Path.join(ROOT, "tiny")
  Fs.mkdirSync(work, { recursive: true })
  Fs.writeFileSync(
    Path.join(work, "hello.c"),
    `#include <stdio.h>\n#include <unistd.h>\nint main(int argc, char **argv) { char cwd[256]; getcwd(cwd, sizeof cwd); printf("tiny says %s from %s as uid %d\\n", argc > 1 ? argv[1] : "nothing", cwd, getuid()); return 0; }\n`
  )
  sh("gcc", ["-static", "-O2", "-o", "hello", "hello.c"], work)
  const layout = Path.join(work, "layout")
  sh("umoci", ["init", "--layout", layout])
  sh("umoci", ["new", "--image", `${layout}:v1`])
  const bundle = Path.join(work, "bundle")
  sh("umoci", ["unpack", "--rootless", "--image", `${layout}:v1`, bundle])
  Fs.mkdirSync(Path.join(bundle, "rootfs", "bin"), { recursive: true })
  Fs.copyFileSync(Path.join(work, "hello"), Path.join(bundle, "rootfs", "bin", "hello"))
  Fs.chmodSync(Path.join(bundle, "rootfs", "bin", "hello"), 0o755)
  sh("umoci", ["repack", "--image", `${layout}:v1`, bundle])
  const archive = Path.join(work, "tiny.tar")
  sh("skopeo", [
    "--insecure-policy",
    "copy",
    "--quiet",
    `oci:${layout}:v1`,
    `docker-archive:${archive}:tiny:v1`
  ])
  return { layout, archive }
}

shareDefaultImage()
const tiny = buildTinyImage()
afterAll(() => Fs.rmSync(ROOT, { recursive: true, force: true }))

layer(TestService.layer({ browserPoolSize: 0, sandbox: { imagesDir: STORE } }), {
  excludeTestServices: true
})("sandbox images", (it) => {
  const env = { SANDBOX_IMAGES_DIR: STORE }

  it.effect(
    "rbs images import takes an OCI layout and a docker archive; list shows them; a session runs each at once",
    () =>
      Effect.gen(function* () {
        const fromLayout = yield* rbs(["images", "import", `${tiny.layout}:v1`, "--name", "tiny"], env)
        assert.strictEqual(fromLayout.code, 0, fromLayout.stderr)
        assert.match(fromLayout.stdout, /^Imported tiny \(sha256:[0-9a-f]{64}\) into /)
        const fromArchive = yield* rbs(["images", "import", tiny.archive, "--name", "tiny-archive"], env)
        assert.strictEqual(fromArchive.code, 0, fromArchive.stderr)

        const listed = yield* rbs(["images", "list"], env)
        assert.strictEqual(listed.code, 0, listed.stderr)
        const lines = listed.stdout.trim().split("\n")
        assert.match(lines[0]!, /^NAME\s+DIGEST\s+SIZE\s+CREATED$/)
        assert.deepStrictEqual(
          lines.slice(1).map((line) => line.split(/\s+/)[0]),
          ["debian", "tiny", "tiny-archive"]
        )

        // The running service sees them without a restart.
        const service = yield* TestService.TestService
        const account = yield* signUp(service.baseUrl)
        for (const image of ["tiny", "tiny-archive"]) {
          const ran = yield* request(service.baseUrl, "POST", "/v1/exec", {
            key: account.key,
            body: { image, command: ["/bin/hello", image] }
          })
          assert.strictEqual(ran.status, 200, ran.text)
          // An image with no home dir and no /tmp gets both; root in the sandbox (an unprivileged uid outside).
          assert.strictEqual(ran.json.stdout, `tiny says ${image} from /root as uid 0\n`)
          assert.strictEqual(ran.json.exit_code, 0)
        }
        const session = yield* request(service.baseUrl, "GET", "/v1/sessions?limit=1", { key: account.key })
        assert.strictEqual(session.json.data[0].image, "tiny-archive")
      })
  )

  it.effect("an import that cannot be done says why, on one line, and changes nothing", () =>
    Effect.gen(function* () {
      const before = Fs.readFileSync(Path.join(STORE, "oci", "index.json"), "utf8")
      const missing = yield* rbs(["images", "import", Path.join(ROOT, "nothing.tar"), "--name", "x"], env)
      assert.strictEqual(missing.code, 1)
      assert.match(missing.stderr, /^rbs: cannot import .*nothing\.tar: no such file or directory/)
      const badName = yield* rbs(["images", "import", tiny.archive, "--name", "../up"], env)
      assert.strictEqual(badName.code, 1)
      assert.include(badName.stderr, "an image name is letters, digits")
      const notAnImage = Path.join(ROOT, "not-an-image.tar")
      Fs.writeFileSync(notAnImage, "not a tarball")
      const broken = yield* rbs(["images", "import", notAnImage, "--name", "broken"], env)
      assert.strictEqual(broken.code, 1)
      assert.match(broken.stderr, /^rbs: cannot import /)
      assert.strictEqual(Fs.readFileSync(Path.join(STORE, "oci", "index.json"), "utf8"), before)

      const service = yield* TestService.TestService
      const account = yield* signUp(service.baseUrl)
      const unknown = yield* request(service.baseUrl, "POST", "/v1/sessions", {
        key: account.key,
        body: { session_type: "sandbox", image: "broken" }
      })
      assert.strictEqual(unknown.status, 400)
      assert.deepStrictEqual(unknown.json.error.code, "invalid_field")
      assert.include(unknown.json.error.message, "image")
    })
  )
})
