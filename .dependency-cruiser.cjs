// The layers of src/ and the rules that keep them (docs/internals/architecture.md, "Layout"):
//
//   main      composition roots: the only place that wires an implementation into a port
//   edge      transports: HTTP, live connections, MCP, CLI, the typed client
//   features  use cases with the tables they own          } never import each other's layer:
//   runtimes  adapters of the session-runtime port        } both stand on runtime/
//   runtime   the session-runtime port and the warm pool
//   platform  technical services without a business rule
//   kernel    ids, errors, shared schemas; imports nothing of ours
//
// Each layer imports only the layers below it. `npm test` runs this check.
const layers = ["kernel", "platform", "runtime", "runtimes", "features", "edge", "main"]

/** The layers a file of `layer` may not import: those above it (and, for features and runtimes, each other). */
const forbiddenFor = (layer) => {
  const above = layers.slice(layers.indexOf(layer) + 1)
  if (layer === "runtimes") return above
  if (layer === "features") return [...above, "runtimes"]
  return above
}

const layerRules = layers
  .filter((layer) => layer !== "main")
  .map((layer) => ({
    name: `${layer}-imports-below`,
    comment: `${layer}/ imports only the layers below it (${forbiddenFor(layer).join(", ")} are not)`,
    severity: "error",
    from: { path: `^src/${layer}/` },
    to: { path: `^src/(${forbiddenFor(layer).join("|")})/` }
  }))

/**
 * What each feature offers the others: its services, the ports and hook lists it defines, its
 * contracts (docs/internals/architecture.md, "Layout"). Everything else in a feature folder is its
 * own; another feature goes through one of these.
 */
const featureSurfaces = {
  assistants: ["AssistantUsage"],
  audit: ["Audit"],
  billing: [],
  extensions: [],
  images: [],
  idempotency: ["Idempotency"],
  identity: ["AccountHooks", "AccountsRepo", "ApiKeysRepo", "OidcLogin", "ProviderLogins"],
  jobs: ["ActiveJobs", "JobKind", "JobSession", "Jobs"],
  limits: [
    "AccountBounds",
    "ConcurrencySlots",
    "LimitMetrics",
    "LimitsConfig",
    "LimitsMiddleware",
    "RateLimits"
  ],
  policy: ["Access", "AuthMiddleware", "PrincipalResolvers"],
  recordings: ["Recordings"],
  sessions: [
    "CreateSession",
    "Exec",
    "SessionAdmission",
    "SessionLifecycle",
    "SessionExtensions",
    "SessionImages",
    "SessionWorkspaces",
    "Sessions",
    "SessionsRepo"
  ],
  usage: [],
  webhooks: ["Outbox"],
  workspaces: ["WorkspaceStore"]
}

const surfaceRules = Object.entries(featureSurfaces).map(([feature, modules]) => ({
  name: `features-use-${feature}-surface`,
  comment: `Another feature uses features/${feature} through ${modules.length === 0 ? "nothing" : modules.join(", ")} alone`,
  severity: "error",
  from: { path: "^src/features/", pathNot: `^src/features/${feature}/` },
  to: {
    path: `^src/features/${feature}/`,
    ...(modules.length === 0 ? {} : { pathNot: `^src/features/${feature}/(${modules.join("|")})\\.ts$` })
  }
}))

module.exports = {
  forbidden: [
    {
      name: "no-circular",
      comment:
        "A cycle is a design error: a port the lower module owns, a hook list, or wiring in main/ breaks it",
      severity: "error",
      from: {},
      to: { circular: true }
    },
    {
      name: "in-a-layer",
      comment: "Every module of src/ lives in one of the layers",
      severity: "error",
      from: { path: "^src/", pathNot: `^src/(${layers.join("|")})/` },
      to: {}
    },
    ...layerRules,
    {
      name: "runtimes-apart",
      comment:
        "A runtime adapter does not import another; what they share lives in runtimes/shared (context sessions are browser contexts, so context/ may use browser/)",
      severity: "error",
      from: { path: "^src/runtimes/(browser|sandbox|shared)/" },
      to: { path: "^src/runtimes/(browser|context|sandbox)/", pathNot: "^src/runtimes/$1/" }
    },
    {
      name: "context-on-browser",
      comment: "The context runtime uses the browser runtime's launcher; nothing else of another runtime",
      severity: "error",
      from: { path: "^src/runtimes/context/" },
      to: { path: "^src/runtimes/sandbox/" }
    },
    ...surfaceRules,
    {
      name: "contracts-declare-only",
      comment:
        "A feature's contract (XApi.ts) imports declarations only: the kernel's schemas and errors, the access rules and the middleware tags (docs/internals/architecture.md, \"Layout\")",
      severity: "error",
      from: { path: "^src/features/[^/]+/[^/]+Api\\.ts$" },
      to: {
        path: "^src/",
        pathNot: [
          "^src/kernel/",
          "^src/features/policy/(Access|AuthMiddleware)\\.ts$",
          "^src/features/limits/LimitsMiddleware\\.ts$"
        ]
      }
    }
  ],
  options: {
    // TypeScript 7 has no JavaScript API; swc parses the sources.
    parser: "swc",
    doNotFollow: { path: "node_modules" },
    exclude: { path: "node_modules" }
  }
}
