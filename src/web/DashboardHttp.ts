import { Context, Effect, Layer } from "effect"
import { HttpRouter, type HttpServerRequest, HttpServerResponse } from "effect/http"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import * as Zlib from "node:zlib"
import { ServiceConfig } from "../Config.ts"
import { RouteNotFound, ServiceUnavailable } from "../domain/Errors.ts"
import { errorResponse } from "../http/ErrorResponses.ts"

const CONTENT_TYPES: Readonly<Record<string, string>> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".woff2": "font/woff2",
  ".json": "application/json",
  ".webmanifest": "application/manifest+json"
}

/** A built file held in memory, with its compressed forms (the dashboard is a few hundred kB). */
export interface Asset {
  readonly type: string
  readonly raw: Uint8Array
  readonly br: Uint8Array
  readonly gzip: Uint8Array
}

const load = async (file: string): Promise<Asset> => {
  const raw = await Fs.readFile(file)
  return {
    type: CONTENT_TYPES[Path.extname(file)] ?? "application/octet-stream",
    raw,
    br: Zlib.brotliCompressSync(raw, { params: { [Zlib.constants.BROTLI_PARAM_QUALITY]: 11 } }),
    gzip: Zlib.gzipSync(raw, { level: 9 })
  }
}

/** The dashboard's own page may load only what it serves itself, and never be framed. */
export const contentSecurityPolicy = (streamBase: string) =>
  [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' blob: data:",
    "media-src 'self' blob:",
    // The live view's WebSocket, wherever STREAM_BASE puts it (ws: and wss: of this origin included).
    `connect-src 'self' ws: wss: ${new URL(streamBase).origin}`,
    "font-src 'self'",
    "manifest-src 'self'",
    "frame-ancestors 'none'",
    "base-uri 'none'",
    "form-action 'self'"
  ].join("; ")

const send = (
  request: HttpServerRequest.HttpServerRequest,
  asset: Asset,
  headers: Record<string, string>
) => {
  const accepts = request.headers["accept-encoding"] ?? ""
  const [body, encoding] = /\bbr\b/.test(accepts)
    ? [asset.br, "br"]
    : /\bgzip\b/.test(accepts)
      ? [asset.gzip, "gzip"]
      : [asset.raw, undefined]
  return HttpServerResponse.uint8Array(body, {
    contentType: asset.type,
    headers: {
      ...headers,
      vary: "accept-encoding",
      "x-content-type-options": "nosniff",
      ...(encoding === undefined ? {} : { "content-encoding": encoding })
    }
  })
}

/**
 * The dashboard's build (`web/dist`), read once and compressed while the
 * service starts, before it listens: a request never waits for it.
 */
export class DashboardAssets extends Context.Service<
  DashboardAssets,
  {
    /** `undefined` when the dashboard was not built. */
    readonly index: Asset | undefined
    readonly assets: ReadonlyMap<string, Asset>
  }
>()("rbs/web/DashboardAssets") {
  static readonly layer = Layer.effect(
    DashboardAssets,
    Effect.gen(function* () {
      const dir = (yield* ServiceConfig).dashboardDir
      const index = yield* Effect.promise(() => load(Path.join(dir, "index.html")).catch(() => undefined))
      const assets = new Map<string, Asset>()
      const names = yield* Effect.promise(() =>
        Fs.readdir(Path.join(dir, "assets")).catch(() => [] as Array<string>)
      )
      for (const name of names) {
        assets.set(name, yield* Effect.promise(() => load(Path.join(dir, "assets", name))))
      }
      if (index === undefined) {
        yield* Effect.logWarning("dashboard.not_built", {
          dir,
          hint: "npm start builds it (npm run build:web)"
        })
      }
      return DashboardAssets.of({ index, assets })
    })
  )
}

/**
 * The dashboard (`web/`, built by the set-up into `web/dist`): `GET /` is its
 * page, `GET /assets/<hashed name>` its scripts and styles, cached for a year
 * (a new build has new names). Without a build, `/` is 503.
 */
export const layer = HttpRouter.use((router) =>
  Effect.gen(function* () {
    const config = yield* ServiceConfig
    const { index, assets } = yield* DashboardAssets
    const pageHeaders = {
      "cache-control": "no-cache",
      "content-security-policy": contentSecurityPolicy(config.streamBase),
      "x-frame-options": "DENY",
      "referrer-policy": "same-origin",
      "cross-origin-opener-policy": "same-origin"
    }

    yield* router.add("GET", "/", (request) =>
      Effect.succeed(
        index === undefined ? errorResponse(new ServiceUnavailable()) : send(request, index, pageHeaders)
      )
    )
    yield* router.add("GET", "/assets/:name", (request) =>
      Effect.map(HttpRouter.params, (params) => {
        const asset = assets.get(params.name ?? "")
        return asset === undefined
          ? errorResponse(new RouteNotFound())
          : send(request, asset, { "cache-control": "public, max-age=31536000, immutable" })
      })
    )
  })
)
