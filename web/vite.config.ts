import { fileURLToPath } from "node:url"
import { defineConfig } from "vite"

// Built into web/dist by the set-up (`npm start`, `npm test`) and served by the service at `/`.
// `npm run build:web` builds it by hand; the dev server proxies the API to a running service.
const root = fileURLToPath(new URL(".", import.meta.url))
const service = process.env.RBS_URL ?? "http://127.0.0.1:8080"

export default defineConfig({
  root,
  base: "/",
  publicDir: false,
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
