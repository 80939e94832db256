import * as Cdp from "./CdpClient.ts"

/** Chromium could not load the page (DNS, the egress guard, TLS): the detail says why. */
export class NavigationFailed extends Error {
  override readonly name = "NavigationFailed"
}

/** What loading a URL answered: the final URL and the main document's HTTP status. */
export interface Loaded {
  readonly url: string
  readonly status: number | null
}

/**
 * Loads `url` in the attached page `sessionId`: waits for its load event, then
 * `waitMs`. A navigation Chromium refuses (DNS, the egress guard, TLS) fails
 * with `NavigationFailed`.
 */
export const load = async (
  client: Cdp.CdpClient,
  sessionId: string,
  url: string,
  waitMs: number
): Promise<Loaded> => {
  await client.send("Page.enable", {}, sessionId)
  await client.send("Network.enable", {}, sessionId)
  // The main document's answer, by loader: it may arrive before `Page.navigate` answers with its loader.
  const statuses = new Map<string, number>()
  const offResponse = client.on("Network.responseReceived", (params, from) => {
    if (from === sessionId && params.type === "Document" && !statuses.has(params.loaderId))
      statuses.set(params.loaderId, params.response.status)
  })
  let loaderId: string | undefined
  let offLoad = () => {}
  const loaded = new Promise<void>((resolve) => {
    offLoad = client.on("Page.loadEventFired", (_params, from) => {
      if (from === sessionId) resolve()
    })
  })
  try {
    const navigated = await client.send<{ loaderId?: string; errorText?: string }>(
      "Page.navigate",
      { url },
      sessionId
    )
    if (navigated.errorText !== undefined && navigated.errorText !== "")
      throw new NavigationFailed(`Loading ${url} failed: ${navigated.errorText}.`)
    loaderId = navigated.loaderId
    // A same-document navigation (a fragment) has no loader and fires no load event.
    if (loaderId !== undefined) await loaded
    if (waitMs > 0) await new Promise((resolve) => setTimeout(resolve, waitMs))
  } finally {
    offResponse()
    offLoad()
  }
  const status = loaderId === undefined ? null : (statuses.get(loaderId) ?? null)
  return { url: (await evaluateValue<string>(client, sessionId, "location.href")) ?? url, status }
}

/** The value of a side-effect-free `expression` in the page, returned by value. */
export const evaluateValue = async <A>(client: Cdp.CdpClient, sessionId: string, expression: string) => {
  const { result } = await client.send<{ result: { value?: A } }>(
    "Runtime.evaluate",
    { expression, returnByValue: true },
    sessionId
  )
  return result.value
}
