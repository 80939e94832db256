/**
 * The library for custom hosts: compose these layers into your own Effect
 * program. `layer(config)` is the whole service with its HTTP server;
 * `layerLibrary(config)` is the service without HTTP, driven through
 * `Sessions`. Nothing here reads `process.env` or exits the process.
 */
export { layer, layerCore, layerFromEnv, layerLibrary, layerRoutes, layerServer } from "./App.ts"
export {
  makeServiceConfig,
  ServiceConfig,
  type ServiceConfigInput,
  type ServiceConfigShape
} from "./Config.ts"

// Use cases
export { Sessions } from "./sessions/Sessions.ts"
export { SessionAdmission, type SessionOwner } from "./sessions/SessionAdmission.ts"
export { Identity } from "./auth/Identity.ts"
export { BrowserPool } from "./browser/BrowserPool.ts"

// The HTTP contract and its handler layers, to mount /v1/* in a host's own router
export { Api, SystemApi } from "./Api.ts"
export { SessionsApi } from "./sessions/SessionsApi.ts"
export { AuthApi, KeysApi } from "./auth/AuthApi.ts"
export { SessionsHttp } from "./sessions/SessionsHttp.ts"
export * as AuthHttp from "./auth/AuthHttp.ts"
export { SystemHttp } from "./http/SystemHttp.ts"
export * as ErrorResponses from "./http/ErrorResponses.ts"
export { RequestValidation } from "./http/RequestValidation.ts"
export {
  ApiKeyAuth,
  CookieAuth,
  CurrentPrincipal,
  CurrentUser,
  SESSION_COOKIE
} from "./auth/AuthMiddleware.ts"
export * as CdpRelay from "./cdp/CdpRelay.ts"

// Database
export * as Database from "./db/Database.ts"
export * as Migrations from "./db/Migrations.ts"
export * as EmbeddedPostgres from "./db/EmbeddedPostgres.ts"

// Wire shapes and errors
export * from "./domain/Errors.ts"
export * from "./domain/Session.ts"
export * from "./domain/Identity.ts"
