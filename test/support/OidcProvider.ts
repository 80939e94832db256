// A real OpenID Connect provider (panva's oidc-provider, certified) on a
// loopback port, with one confidential client and a few users. Tests log in
// without a browser: `login` follows the redirects with fetch and a cookie
// jar, and the interaction pages (login, consent) are answered by a handler in
// the same server, as a user clicking through them would.
import { Effect } from "effect"
import * as Crypto from "node:crypto"
import * as Http from "node:http"
import type * as Net from "node:net"
import Provider, { type Adapter, type AdapterPayload, type Configuration } from "oidc-provider"

export interface TestUser {
  readonly sub: string
  readonly email?: string
  readonly email_verified?: boolean
  readonly name?: string
}

export interface StartOptions {
  /** The client's registered callbacks; `login` stops at a redirect to any of them. */
  readonly redirectUris: ReadonlyArray<string>
  readonly users: ReadonlyArray<TestUser>
  /** A fixed port, to start a provider where a client already expects one. Default: any free port. */
  readonly port?: number
  /** Default: random. */
  readonly clientId?: string
  readonly clientSecret?: string
  readonly clientAuthMethod?: "client_secret_basic" | "client_secret_post"
  /**
   * Put email and name in the ID token, as Google does. By default they come
   * only from userinfo, as the specification has it when an access token is issued.
   */
  readonly claimsInIdToken?: boolean
}

export interface TestOidcProvider {
  readonly issuer: string
  readonly clientId: string
  readonly clientSecret: string
  /** Every request served, as `METHOD /path`, to see what a client fetched. */
  readonly requests: ReadonlyArray<string>
  /**
   * Plays the user at the provider: opens `authorizationUrl`, logs in as `sub`
   * (or denies the request) and grants consent; returns the URL the provider
   * redirects back to, with `code` and `state` (or `error`).
   */
  readonly login: (
    authorizationUrl: string,
    sub: string,
    options?: { readonly deny?: boolean }
  ) => Promise<URL>
  readonly stop: () => Promise<void>
}

/** A port nothing listens on at the moment, for a provider that is down. */
export const reservePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = Http.createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as Net.AddressInfo
      server.close(() => resolve(port))
    })
  })

/**
 * The in-memory storage of one provider. oidc-provider's own is shared by all
 * instances of a process and warns at start-up; codes and sessions of a test
 * provider need no more than a Map.
 */
const memoryAdapter = () => {
  const store = new Map<string, AdapterPayload>()
  const sessionByUid = new Map<string, string>()
  return (model: string): Adapter => {
    const key = (id: string) => `${model}:${id}`
    return {
      upsert: async (id, payload) => {
        store.set(key(id), payload)
        if (model === "Session" && payload.uid !== undefined) sessionByUid.set(payload.uid, id)
      },
      find: async (id) => store.get(key(id)),
      findByUid: async (uid) => {
        const id = sessionByUid.get(uid)
        return id === undefined ? undefined : store.get(key(id))
      },
      findByUserCode: async () => undefined,
      consume: async (id) => {
        const payload = store.get(key(id))
        if (payload !== undefined) payload.consumed = Math.floor(Date.now() / 1000)
      },
      destroy: async (id) => {
        store.delete(key(id))
      },
      revokeByGrantId: async (grantId) => {
        for (const [entry, payload] of store) if (payload.grantId === grantId) store.delete(entry)
      }
    }
  }
}

const listen = (server: Http.Server, port: number) =>
  new Promise<number>((resolve, reject) => {
    server.once("error", reject)
    server.listen(port, "127.0.0.1", () => resolve((server.address() as Net.AddressInfo).port))
  })

export const start = async (options: StartOptions): Promise<TestOidcProvider> => {
  const clientId = options.clientId ?? `client-${Crypto.randomBytes(4).toString("hex")}`
  const clientSecret = options.clientSecret ?? Crypto.randomBytes(24).toString("base64url")
  const users = new Map(options.users.map((user) => [user.sub, user]))
  const requests: Array<string> = []
  let provider: Provider | undefined

  const interact = async (request: Http.IncomingMessage, response: Http.ServerResponse, oidc: Provider) => {
    const url = new URL(request.url ?? "/", "http://127.0.0.1")
    const details = await oidc.interactionDetails(request, response)
    if (url.searchParams.get("deny") === "1") {
      return oidc.interactionFinished(
        request,
        response,
        { error: "access_denied", error_description: "The user denied the request." },
        { mergeWithLastSubmission: false }
      )
    }
    if (details.prompt.name === "login") {
      const sub = url.searchParams.get("sub") ?? ""
      if (!users.has(sub)) {
        response.writeHead(400, { "content-type": "text/plain" }).end(`no test user "${sub}"`)
        return
      }
      return oidc.interactionFinished(
        request,
        response,
        { login: { accountId: sub } },
        { mergeWithLastSubmission: false }
      )
    }
    // Consent: grant what the client asked for, as the user clicking "Allow".
    const grant = new oidc.Grant({ accountId: details.session!.accountId, clientId })
    const missing = details.prompt.details as {
      missingOIDCScope?: Array<string>
      missingOIDCClaims?: Array<string>
    }
    if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(" "))
    if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims)
    const grantId = await grant.save()
    return oidc.interactionFinished(
      request,
      response,
      { consent: { grantId } },
      { mergeWithLastSubmission: true }
    )
  }

  const clientAuthMethod = options.clientAuthMethod ?? "client_secret_basic"
  const server = Http.createServer((request, response) => {
    const path = new URL(request.url ?? "/", "http://127.0.0.1").pathname
    requests.push(`${request.method} ${path}`)
    // oidc-provider takes the secret either way whatever the client registered;
    // many providers accept only the method they advertise, and so does this one.
    const basic = request.headers.authorization !== undefined
    if (path === "/token" && basic !== (clientAuthMethod === "client_secret_basic")) {
      response.writeHead(401, { "content-type": "application/json" })
      response.end(JSON.stringify({ error: "invalid_client", error_description: `use ${clientAuthMethod}` }))
    } else if (provider === undefined) {
      response.writeHead(503).end()
    } else if (request.url?.startsWith("/interaction/")) {
      interact(request, response, provider).catch((error: unknown) => {
        if (!response.headersSent) response.writeHead(500, { "content-type": "text/plain" })
        response.end(String(error))
      })
    } else {
      provider.callback()(request, response)
    }
  })
  const port = await listen(server, options.port ?? 0)
  const issuer = `http://127.0.0.1:${port}`

  const signingKey = Crypto.generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey.export({
    format: "jwk"
  })
  const configuration: Configuration = {
    adapter: memoryAdapter(),
    clients: [
      {
        client_id: clientId,
        client_secret: clientSecret,
        redirect_uris: [...options.redirectUris],
        grant_types: ["authorization_code"],
        response_types: ["code"],
        token_endpoint_auth_method: clientAuthMethod
      }
    ],
    clientAuthMethods: [clientAuthMethod],
    responseTypes: ["code"],
    pkce: { required: () => true },
    claims: { openid: ["sub"], email: ["email", "email_verified"], profile: ["name"] },
    conformIdTokenClaims: options.claimsInIdToken !== true,
    findAccount: (_ctx, sub) => {
      const user = users.get(sub)
      return user === undefined ? undefined : { accountId: sub, claims: () => ({ ...user }) }
    },
    interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
    features: { devInteractions: { enabled: false } },
    jwks: { keys: [{ ...signingKey, kid: "test", use: "sig", alg: "RS256" }] },
    cookies: { keys: [Crypto.randomBytes(32).toString("hex")] },
    // Set explicitly: the defaults print a notice each.
    ttl: { AccessToken: 600, AuthorizationCode: 60, IdToken: 600, Interaction: 600, Session: 600, Grant: 600 }
  }
  provider = new Provider(issuer, configuration)

  const login = async (authorizationUrl: string, sub: string, loginOptions?: { readonly deny?: boolean }) => {
    const jar = new Map<string, { readonly path: string; readonly name: string; readonly value: string }>()
    let next = new URL(authorizationUrl)
    for (let hop = 0; hop < 20; hop++) {
      if (next.origin !== issuer) return next
      if (next.pathname.startsWith("/interaction/")) {
        next.searchParams.set("sub", sub)
        if (loginOptions?.deny === true) next.searchParams.set("deny", "1")
      }
      const cookie = [...jar.values()]
        .filter(
          (entry) => next.pathname === entry.path || next.pathname.startsWith(entry.path.replace(/\/?$/, "/"))
        )
        .map((entry) => `${entry.name}=${entry.value}`)
        .join("; ")
      const response = await fetch(next, { redirect: "manual", headers: cookie === "" ? {} : { cookie } })
      for (const header of response.headers.getSetCookie()) {
        const [pair = "", ...attributes] = header.split(";").map((part) => part.trim())
        const name = pair.slice(0, pair.indexOf("="))
        const value = pair.slice(pair.indexOf("=") + 1)
        const path = attributes.find((part) => /^path=/i.test(part))?.slice(5) ?? "/"
        const expired = attributes.some(
          (part) => /^expires=/i.test(part) && Date.parse(part.slice(8)) < Date.now()
        )
        if (value === "" || expired) jar.delete(`${path} ${name}`)
        else jar.set(`${path} ${name}`, { path, name, value })
      }
      const location = response.headers.get("location")
      if (response.status < 300 || response.status >= 400 || location === null) {
        throw new Error(
          `the test provider answered ${response.status}: ${(await response.text()).slice(0, 500)}`
        )
      }
      await response.body?.cancel()
      next = new URL(location, next)
    }
    throw new Error("too many redirects at the test provider")
  }

  const stop = () =>
    new Promise<void>((resolve, reject) => {
      server.close((error) => (error ? reject(error) : resolve()))
      server.closeAllConnections()
    })

  return {
    issuer,
    clientId,
    clientSecret,
    get requests() {
      return [...requests]
    },
    login,
    stop
  }
}

/** `start`, stopped with the scope. */
export const serve = (options: StartOptions) =>
  Effect.acquireRelease(
    Effect.promise(() => start(options)),
    (provider) => Effect.promise(() => provider.stop())
  )
