import { Context, Effect, Layer } from "effect"
import { HttpRouter, type HttpServerRequest, HttpServerResponse } from "effect/http"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import * as Util from "node:util"
import * as Zlib from "node:zlib"
import { HttpConfig, PublicUrls } from "../../platform/config/Config.ts"
import { RouteNotFound, ServiceUnavailable } from "../../kernel/Errors.ts"
import { errorResponse } from "../guard/ErrorResponses.ts"

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

const brotli = Util.promisify(Zlib.brotliCompress)
const gzip = Util.promisify(Zlib.gzip)

/**
 * A compressed form the build wrote beside `file` (`<file>.br`, `<file>.gz`),
 * when it is at least as new as the file; otherwise it is made here, on
 * libuv's threads (a build without them, such as one from another tool).
 */
const compressed = async (
  file: string,
  suffix: string,
  raw: Buffer,
  make: (raw: Buffer) => Promise<Buffer>
) => {
  const [source, built] = await Promise.all([
    Fs.stat(file),
    Fs.stat(`${file}${suffix}`).catch(() => undefined)
  ])
  return built !== undefined && built.mtimeMs >= source.mtimeMs ? Fs.readFile(`${file}${suffix}`) : make(raw)
}

const load = async (file: string): Promise<Asset> => {
  const raw = await Fs.readFile(file)
  const [br, gz] = await Promise.all([
    compressed(file, ".br", raw, (bytes) =>
      brotli(bytes, { params: { [Zlib.constants.BROTLI_PARAM_QUALITY]: 11 } })
    ),
    compressed(file, ".gz", raw, (bytes) => gzip(bytes, { level: 9 }))
  ])
  return { type: CONTENT_TYPES[Path.extname(file)] ?? "application/octet-stream", raw, br, gzip: gz }
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
 * The dashboard's build (`web/dist`) with the compressed forms the build
 * wrote beside each file, read once while the service starts, before it
 * listens: a request never waits for it.
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
      const dir = (yield* HttpConfig).dashboardDir
      const index = yield* Effect.promise(() => load(Path.join(dir, "index.html")).catch(() => undefined))
      const assets = new Map<string, Asset>()
      const names = yield* Effect.promise(() =>
        Fs.readdir(Path.join(dir, "assets")).catch(() => [] as Array<string>)
      )
      const served = names.filter((name) => !/\.(br|gz)$/.test(name))
      const loaded = yield* Effect.promise(() =>
        Promise.all(served.map((name) => load(Path.join(dir, "assets", name))))
      )
      served.forEach((name, i) => assets.set(name, loaded[i]!))
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
    const config = yield* PublicUrls
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
