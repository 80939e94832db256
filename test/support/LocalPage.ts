import { Effect } from "effect"
import * as Http from "node:http"
import type * as Net from "node:net"

/**
 * Pages for the browser under test:
 * - `/counter`: a big button (CSS 100,100 to 400,300) counting its clicks in
 *   `#count`, a text field (`#field`, at 100,400), a counter of touches, and
 *   3000 px of height to scroll;
 * - `/ticking`: the counter page with a clock (`#clock`) that changes every 50 ms;
 * - `/animated`: repaints on every animation frame, forever;
 * - anything else: plain HTML with `?title=` as its title.
 */
const COUNTER =
  `<!doctype html><html><head><title>counter</title></head><body style="margin:0;font:24px sans-serif;height:3000px">` +
  `<button id="button" style="position:absolute;left:100px;top:100px;width:300px;height:200px" ` +
  `onclick="count.textContent = Number(count.textContent) + 1">press</button>` +
  `<div id="count" style="position:absolute;left:500px;top:100px">0</div>` +
  `<input id="field" style="position:absolute;left:100px;top:400px;width:300px">` +
  `<div id="touches" style="position:absolute;left:500px;top:200px">0</div>` +
  `<script>button.addEventListener("touchstart", () => touches.textContent = Number(touches.textContent) + 1)</script>` +
  `</body></html>`

const PAGES: Record<string, string> = {
  "/counter": COUNTER,
  "/ticking": COUNTER.replace(
    "</body>",
    `<div id="clock" style="position:absolute;left:100px;top:500px">0</div>` +
      `<script>setInterval(() => clock.textContent = Date.now(), 50)</script></body>`
  ),
  "/animated":
    `<!doctype html><html><head><title>animated</title></head><body style="margin:0">` +
    `<div id="box" style="position:absolute;top:100px;width:100px;height:100px;background:#c0392b"></div>` +
    `<script>const step = (t) => { box.style.left = (t / 3 % 1000) + "px"; requestAnimationFrame(step) }; requestAnimationFrame(step)</script>` +
    `</body></html>`
}

/** A small page server on loopback, closed with the scope. */
export const serve = Effect.acquireRelease(
  Effect.promise(
    () =>
      new Promise<{ readonly url: string; readonly server: Http.Server }>((resolve) => {
        const server = Http.createServer((request, response) => {
          const url = new URL(request.url ?? "/", "http://x")
          const title = url.searchParams.get("title") ?? "local page"
          response.writeHead(200, { "content-type": "text/html; charset=utf-8" })
          response.end(
            PAGES[url.pathname] ??
              `<!doctype html><html><head><title>${title}</title></head>` +
                `<body style="margin:0;background:#1e90ff"><h1>${title}</h1></body></html>`
          )
        })
        server.listen(0, "127.0.0.1", () => {
          const { port } = server.address() as Net.AddressInfo
          resolve({ url: `http://127.0.0.1:${port}/`, server })
        })
      })
  ),
  ({ server }) =>
    Effect.promise(
      () =>
        new Promise<void>((resolve) => {
          server.closeAllConnections()
          server.close(() => resolve())
        })
    )
).pipe(Effect.map(({ url }) => url))
