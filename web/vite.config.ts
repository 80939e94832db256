import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import * as Zlib from "node:zlib"
import { defineConfig, type Plugin } from "vite"

// Built into web/dist by the set-up (`npm start`, `npm test`) and served by the service at `/`.
// `npm run build:web` builds it by hand; the dev server proxies the API to a running service.
const root = fileURLToPath(new URL(".", import.meta.url))
const service = process.env.RBS_URL ?? "http://127.0.0.1:8080"

/**
 * Writes `<file>.br` and `<file>.gz` beside each built file, compressed once
 * here at their best, so the service reads them as they are at start instead
 * of compressing the dashboard itself (about a second of CPU) each time.
 */
const precompress = (): Plugin => ({
  name: "rbs-precompress",
  apply: "build",
  closeBundle() {
    const dist = Path.join(root, "dist")
    const files = [Path.join(dist, "index.html")].concat(
      Fs.readdirSync(Path.join(dist, "assets")).map((name) => Path.join(dist, "assets", name))
    )
    for (const file of files) {
      if (/\.(br|gz)$/.test(file)) continue
      const raw = Fs.readFileSync(file)
      Fs.writeFileSync(
        `${file}.br`,
        Zlib.brotliCompressSync(raw, { params: { [Zlib.constants.BROTLI_PARAM_QUALITY]: 11 } })
      )
      Fs.writeFileSync(`${file}.gz`, Zlib.gzipSync(raw, { level: 9 }))
    }
  }
})

export default defineConfig({
  root,
  base: "/",
  publicDir: false,
  plugins: [precompress()],
  oxc: { jsx: { runtime: "automatic", importSource: "preact" } },
  build: {
    outDir: "dist",
    emptyOutDir: true,
    assetsDir: "assets",
    target: "es2022",
    // The service's CSP allows no inline anything: every asset is a file of its own.
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false }
  },
  server: {
    proxy: Object.fromEntries(
      ["/auth", "/v1", "/billing", "/api-docs", "/sessions"].map((path) => [
        path,
        { target: service, ws: path === "/sessions" }
      ])
    )
  }
})
