// The image and the compose file, built and run here as a self-hoster runs them, with Podman for
// Docker and no registry: the README's `docker` lines as written (the address and the names made
// the test's own), its quick start against the container, and two nodes of compose.yaml on one
// PostgreSQL. Run after the rest of the suite (`vitest.containers.config.ts`); the images are kept
// between runs as the build's cache, every container, network and volume made here is removed.
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import puppeteer from "puppeteer-core"
import { request, uniqueEmail } from "../support/Client.ts"
import * as Podman from "../support/Podman.ts"
import {
  bash,
  checkoutFor,
  expectations,
  quickStarts,
  README_ADDRESS,
  unmet
} from "../support/QuickStarts.ts"
import * as TestService from "../support/TestService.ts"

const why = Podman.unavailable()
const readme = Fs.readFileSync("README.md", "utf8")
const blocks = quickStarts(readme)
const repo = process.cwd()

/** Polls `url` until it answers 200 (`timeoutMs` at most): the seconds it took. */
const readyAt = (url: string, timeoutMs = 120_000) =>
  Effect.promise(async () => {
    const started = Date.now()
    while (Date.now() - started < timeoutMs) {
      const ok = await fetch(url, { signal: AbortSignal.timeout(2_000) }).then(
        (response) => response.status === 200,
        () => false
      )
      if (ok) return (Date.now() - started) / 1000
      await new Promise((resolve) => setTimeout(resolve, 250))
    }
    throw new Error(`${url} never answered 200`)
  })

const expectOk = (ran: Podman.Ran, what: string) => assert.strictEqual(ran.code, 0, `${what}: ${ran.output}`)

describe.skipIf(why !== undefined)(
  `the container image${why === undefined ? "" : ` (skipped: ${why})`}`,
  () => {
    const env = { CONTAINERS_CONF: Podman.containersConf() }

    it.live(
      "builds from the Dockerfile with no registry, and the README's `docker run` line and quick start work against it, a browser in its cell in an unprivileged container; `docker stop` drains and exits 0",
      () =>
        Effect.gen(function* () {
          yield* Podman.baseImage(env)
          const built = yield* Podman.run("podman", [...Podman.buildArgs(), "-t", Podman.IMAGE, "."], env)
          expectOk(built, "podman build")
          const size = Number(
            (yield* Podman.run(
              "podman",
              ["image", "inspect", "--format", "{{.Size}}", Podman.IMAGE],
              env
            )).output.trim()
          )
          console.log(
            `image ${Podman.IMAGE}: ${(size / 1e9).toFixed(2)} GB, built in ${built.seconds.toFixed(1)} s`
          )

          const name = `rbs-test-${Crypto.randomBytes(4).toString("hex")}`
          const port = yield* TestService.freePort
          const baseUrl = `http://127.0.0.1:${port}`
          yield* Effect.addFinalizer(() =>
            Effect.all([
              Podman.run("podman", ["rm", "-f", "-v", "-t", "0", name], env),
              Podman.run("podman", ["volume", "rm", "-f", `${name}-data`], env)
            ])
          )
          const container = blocks
            .get("container")!
            .replace("-t rbs .", `-t ${Podman.IMAGE} .`)
            .replace("--name rbs", `--name ${name}`)
            .replaceAll("docker exec rbs ", `docker exec ${name} `)
            .replace("-v rbs-data:/data rbs", `-v ${name}-data:/data ${Podman.IMAGE}`)
            .replace("-p 127.0.0.1:8080:8080", `-p 127.0.0.1:${port}:8080 -e PUBLIC_URL=${baseUrl}`)
          assert.notMatch(
            container,
            /--name rbs |exec rbs | rbs$|rbs-data/m,
            "every name of the block is the test's"
          )
          const browser = blocks.get("browser")!.replaceAll("npx rbs", `docker exec ${name} rbs`)
          // The README's `docker` words, run by Podman; a build from the checkout, as the README says.
          const prelude = `docker() { if [ "$1" = build ]; then shift; (cd ${repo} && podman ${Podman.buildArgs().join(" ")} "$@"); else podman "$@"; fi; }\n`
          const cwd = yield* checkoutFor(undefined)
          const script = (prelude + container + "\n" + browser).replaceAll(README_ADDRESS, baseUrl)
          const ran = yield* bash(script, cwd, env, undefined)
          assert.strictEqual(ran.code, 0, ran.output)
          assert.deepStrictEqual(
            unmet([...expectations(container, baseUrl), ...expectations(browser, baseUrl)], ran.output),
            [],
            ran.output
          )
          assert.isTrue(Fs.statSync(Path.join(cwd, "shot.png")).size > 1000, "the screenshot")

          // The service is the container's process: SIGTERM ends it at once (one node: no drain), 0.
          const stopped = yield* Podman.run("podman", ["stop", "-t", "20", name], env)
          expectOk(stopped, "podman stop")
          const exit = yield* Podman.run("podman", ["inspect", "--format", "{{.State.ExitCode}}", name], env)
          assert.strictEqual(exit.output.trim(), "0", "it exited by itself, not killed at the timeout")
          assert.isBelow(stopped.seconds, 15)
          console.log(`docker stop to exit: ${stopped.seconds.toFixed(1)} s`)
        }).pipe(Effect.scoped),
      30 * 60_000
    )

    it.live(
      "without --security-opt systempaths=unconfined it runs no browsers and says what the container needs; sandboxes say what they need",
      () =>
        Effect.gen(function* () {
          const name = `rbs-test-${Crypto.randomBytes(4).toString("hex")}`
          const port = yield* TestService.freePort
          yield* Effect.addFinalizer(() => Podman.run("podman", ["rm", "-f", "-v", "-t", "0", name], env))
          expectOk(
            yield* Podman.run(
              "podman",
              ["run", "-d", "--name", name, "-p", `127.0.0.1:${port}:8080`, Podman.IMAGE],
              env
            ),
            "podman run"
          )
          yield* readyAt(`http://127.0.0.1:${port}/readyz`)
          const kinds = (yield* request(`http://127.0.0.1:${port}`, "GET", "/readyz")).json.kinds
          assert.isFalse(kinds.browser.available)
          assert.include(kinds.browser.reason, "run it with --security-opt systempaths=unconfined")
          assert.include(kinds.sandbox.reason, "in a container, run it with --privileged --user 0")
        }).pipe(Effect.scoped),
      5 * 60_000
    )

    it.live(
      "the `sandboxes` target, run --privileged: the README's sandbox quick start works in it (nested runc, the default sandbox image built in)",
      () =>
        Effect.gen(function* () {
          const built = yield* Podman.run(
            "podman",
            [...Podman.buildArgs(), "--target", "sandboxes", "-t", Podman.SANDBOXES_IMAGE, "."],
            env
          )
          expectOk(built, "podman build --target sandboxes")
          const size = Number(
            (yield* Podman.run(
              "podman",
              ["image", "inspect", "--format", "{{.Size}}", Podman.SANDBOXES_IMAGE],
              env
            )).output.trim()
          )
          console.log(
            `image ${Podman.SANDBOXES_IMAGE}: ${(size / 1e9).toFixed(2)} GB, built in ${built.seconds.toFixed(1)} s`
          )
          const name = `rbs-test-${Crypto.randomBytes(4).toString("hex")}`
          const port = yield* TestService.freePort
          const baseUrl = `http://127.0.0.1:${port}`
          yield* Effect.addFinalizer(() => Podman.run("podman", ["rm", "-f", "-v", "-t", "0", name], env))
          expectOk(
            yield* Podman.run(
              "podman",
              [
                "run",
                "-d",
                "--name",
                name,
                "--privileged",
                "-p",
                `127.0.0.1:${port}:8080`,
                "-e",
                `PUBLIC_URL=${baseUrl}`,
                Podman.SANDBOXES_IMAGE
              ],
              env
            ),
            "podman run --privileged"
          )
          yield* readyAt(`${baseUrl}/readyz`)
          const kinds = (yield* request(baseUrl, "GET", "/readyz")).json.kinds
          assert.isTrue(kinds.sandbox.available, JSON.stringify(kinds.sandbox))
          assert.isTrue(kinds.browser.available, JSON.stringify(kinds.browser))
          const browser = blocks.get("browser")!.replaceAll("npx rbs", `podman exec ${name} rbs`)
          const sandbox = blocks.get("sandbox")!
          const cwd = yield* checkoutFor(undefined)
          const ran = yield* bash(
            (browser + "\n" + sandbox).replaceAll(README_ADDRESS, baseUrl),
            cwd,
            env,
            undefined
          )
          assert.strictEqual(ran.code, 0, ran.output)
          assert.deepStrictEqual(unmet(expectations(sandbox, baseUrl), ran.output), [], ran.output)
        }).pipe(Effect.scoped),
      30 * 60_000
    )

    it.live(
      "compose.yaml: PostgreSQL and two nodes; sessions through both, CDP through one node to the other's, and one node stopped, the other serves",
      () =>
        Effect.gen(function* () {
          expectOk(
            yield* Podman.run(
              "podman",
              [...Podman.buildArgs(), "-t", Podman.POSTGRES_IMAGE, "deploy/postgres"],
              env
            ),
            "podman build deploy/postgres"
          )
          const project = `rbstest${Crypto.randomBytes(3).toString("hex")}`
          const [portA, portB] = [yield* TestService.freePort, yield* TestService.freePort]
          const composeEnv = {
            ...env,
            RBS_IMAGE: Podman.IMAGE,
            RBS_POSTGRES_IMAGE: Podman.POSTGRES_IMAGE,
            RBS_PORT_A: String(portA),
            RBS_PORT_B: String(portB),
            RBS_SECRETS_KEY: Crypto.randomBytes(24).toString("hex"),
            POSTGRES_PASSWORD: Crypto.randomBytes(12).toString("hex")
          }
          const compose = (...args: ReadonlyArray<string>) =>
            Podman.run(
              "podman-compose",
              ["-p", project, "-f", "compose.yaml", ...args],
              composeEnv,
              10 * 60_000
            )
          // podman-compose's `down` leaves the project's network: it goes too.
          yield* Effect.addFinalizer(() =>
            Effect.andThen(
              compose("down", "-v", "-t", "1"),
              Podman.run("podman", ["network", "rm", "-f", `${project}_default`], env)
            )
          )
          expectOk(yield* compose("up", "-d", "--no-build"), "podman-compose up")
          const a = `http://127.0.0.1:${portA}`
          const b = `http://127.0.0.1:${portB}`
          const ready = yield* Effect.all([readyAt(`${a}/readyz`), readyAt(`${b}/readyz`)], {
            concurrency: 2
          })
          console.log(`compose up to both nodes ready: ${ready.map((s) => s.toFixed(1)).join(" s, ")} s`)

          // The README's quick start, against node-a as its address.
          const quickStart = blocks
            .get("browser")!
            .replaceAll("npx rbs", `podman exec ${project}_node-a_1 rbs`)
          const cwd = yield* checkoutFor(undefined)
          const ran = yield* bash(quickStart.replaceAll(README_ADDRESS, a), cwd, env, undefined)
          assert.strictEqual(ran.code, 0, ran.output)
          assert.deepStrictEqual(unmet(expectations(quickStart, a), ran.output), [], ran.output)

          const email = uniqueEmail()
          const password = "a long password"
          yield* request(a, "POST", "/auth/register", { body: { email, password } })
          expectOk(
            yield* Podman.run(
              "podman",
              [
                "exec",
                `${project}_node-a_1`,
                "rbs",
                "billing",
                "credit",
                "--account",
                email,
                "--usd",
                "10",
                "--reason",
                "trial"
              ],
              env
            ),
            "rbs billing credit"
          )
          const login = yield* request(a, "POST", "/auth/login", { body: { email, password } })
          const cookie = login.headers.get("set-cookie")!.split(";")[0]!
          const key = (yield* request(a, "POST", "/v1/keys", {
            headers: { cookie },
            body: { name: "compose" }
          })).json.secret as string
          const nodeOf = (id: string) =>
            Effect.map(
              Podman.run(
                "podman",
                [
                  "exec",
                  `${project}_postgres_1`,
                  // As the container's own user, over its socket (peer authentication).
                  "psql",
                  "-At",
                  "-d",
                  "rbs",
                  "-c",
                  `SELECT node_id FROM sessions WHERE id = '${id}'`
                ],
                env
              ),
              (ran) => ran.output.trim()
            )
          const open = (through: string) =>
            Effect.gen(function* () {
              const created = yield* request(through, "POST", "/v1/sessions", { key, body: {} })
              assert.strictEqual(created.status, 201, created.text)
              return { id: created.json.id as string, cdp: created.json.cdp_url as string }
            })
          // Through both nodes, until each runs one (placement picks by free places, chance breaks ties).
          const placed = new Map<string, { id: string; cdp: string }>()
          const others: Array<string> = []
          for (let i = 0; i < 10 && placed.size < 2; i++) {
            const session = yield* open(i % 2 === 0 ? a : b)
            const node = yield* nodeOf(session.id)
            if (placed.has(node)) others.push(session.id)
            else placed.set(node, session)
          }
          assert.sameMembers([...placed.keys()], ["node-a-7000", "node-b-7000"], "sessions on both nodes")
          for (const id of others) yield* request(a, "DELETE", `/v1/sessions/${id}`, { key })

          // CDP through node-a to the session node-b runs: the hop between the containers.
          const onB = placed.get("node-b-7000")!
          const title = yield* Effect.promise(async () => {
            const browser = await puppeteer.connect({
              browserWSEndpoint: `${a.replace("http", "ws")}/sessions/${onB.id}`,
              headers: { Authorization: `Bearer ${key}` }
            })
            try {
              const [page] = await browser.pages()
              await page!.goto("data:text/html,<title>through node-a</title>")
              return await page!.title()
            } finally {
              await browser.disconnect()
            }
          })
          assert.strictEqual(title, "through node-a")

          // node-b stopped (its sessions ended first, so its drain has nothing to wait for): node-a serves.
          for (const session of placed.values())
            yield* request(a, "DELETE", `/v1/sessions/${session.id}`, { key })
          const stopped = yield* Podman.run("podman", ["stop", "-t", "40", `${project}_node-b_1`], env)
          expectOk(stopped, "podman stop node-b")
          console.log(`node-b stopped in ${stopped.seconds.toFixed(1)} s`)
          const after = yield* open(b.replace(String(portB), String(portA)))
          assert.strictEqual(yield* nodeOf(after.id), "node-a-7000", "placed on the node that is left")
          const readyAfter = yield* Effect.promise(async () => {
            for (let i = 0; i < 120; i++) {
              const read = await fetch(`${a}/v1/sessions/${after.id}`, {
                headers: { authorization: `Bearer ${key}` }
              })
              const session = (await read.json()) as { status: string }
              if (session.status !== "creating") return session.status
              await new Promise((resolve) => setTimeout(resolve, 250))
            }
            return "creating"
          })
          assert.strictEqual(readyAfter, "ready")
          yield* request(a, "DELETE", `/v1/sessions/${after.id}`, { key })
        }).pipe(Effect.scoped),
      30 * 60_000
    )
  }
)
