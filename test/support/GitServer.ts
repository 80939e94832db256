// A git repository served over smart HTTP on loopback, as a code host serves it: `git http-backend`
// behind a small HTTP server (CGI). Two commits on main (README "v1" tagged v1, then "v2"). Every
// request is recorded.
import { Effect } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs/promises"
import * as Http from "node:http"
import type * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"

const git = (cwd: string, ...args: Array<string>) =>
  ChildProcess.execFileSync("git", ["-c", "user.email=t@example.com", "-c", "user.name=t", ...args], {
    cwd,
    encoding: "utf8"
  }).trim()

/** `held`: while true, requests wait (a code host that hangs mid-clone), answered once it is false. */
export const serveWith = (options: { readonly hold?: { held: boolean } } = {}) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const root = await Fs.mkdtemp(Path.join(Os.tmpdir(), "rbs-git-"))
      const work = Path.join(root, "work")
      const site = Path.join(root, "site")
      await Fs.mkdir(work)
      git(work, "init", "--quiet", "--initial-branch=main")
      await Fs.writeFile(Path.join(work, "README.md"), "v1\n")
      git(work, "add", ".")
      git(work, "commit", "--quiet", "-m", "one")
      git(work, "tag", "v1")
      const v1 = git(work, "rev-parse", "HEAD")
      await Fs.writeFile(Path.join(work, "README.md"), "v2\n")
      await Fs.mkdir(Path.join(work, "src"))
      await Fs.writeFile(Path.join(work, "src", "app.py"), "print('hi')\n")
      git(work, "add", ".")
      git(work, "commit", "--quiet", "-m", "two")
      const head = git(work, "rev-parse", "HEAD")
      await Fs.mkdir(site)
      git(root, "clone", "--quiet", "--bare", work, Path.join(site, "demo.git"))
      const requests: Array<string> = []
      const server = Http.createServer(async (request, response) => {
        requests.push(request.url ?? "")
        while (options.hold?.held === true) await new Promise((resolve) => setTimeout(resolve, 50))
        const url = new URL(request.url ?? "/", "http://x")
        const backend = ChildProcess.spawn("git", ["http-backend"], {
          env: {
            ...process.env,
            GIT_PROJECT_ROOT: site,
            GIT_HTTP_EXPORT_ALL: "1",
            PATH_INFO: decodeURIComponent(url.pathname),
            QUERY_STRING: url.search.slice(1),
            REQUEST_METHOD: request.method ?? "GET",
            CONTENT_TYPE: request.headers["content-type"] ?? "",
            HTTP_CONTENT_ENCODING: request.headers["content-encoding"] ?? "",
            REMOTE_ADDR: "127.0.0.1"
          }
        })
        request.pipe(backend.stdin)
        const chunks: Array<Buffer> = []
        backend.stdout.on("data", (chunk: Buffer) => chunks.push(chunk))
        backend.on("close", () => {
          const all = Buffer.concat(chunks)
          const end = all.indexOf("\r\n\r\n")
          const headers: Record<string, string> = {}
          let status = 200
          for (const line of all.subarray(0, end).toString().split("\r\n")) {
            const [name, ...rest] = line.split(": ")
            if (name === undefined || rest.length === 0) continue
            if (name.toLowerCase() === "status") status = Number(rest.join(": ").split(" ")[0])
            else headers[name] = rest.join(": ")
          }
          response.writeHead(status, headers).end(all.subarray(end + 4))
        })
      })
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()))
      const port = (server.address() as Net.AddressInfo).port
      return { root, server, url: `http://127.0.0.1:${port}/demo.git`, v1, head, requests }
    }),
    ({ root, server }) =>
      Effect.promise(async () => {
        server.closeAllConnections()
        await new Promise<void>((resolve) => server.close(() => resolve()))
        await Fs.rm(root, { recursive: true, force: true })
      })
  )

export const serve = serveWith()
