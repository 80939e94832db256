import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { NodeHop } from "../../../src/edge/live/NodeHop.ts"
import { ServiceConfig } from "../../../src/platform/config/Config.ts"
import { Secrets } from "../../../src/platform/crypto/Secrets.ts"
import { systemOwner } from "../../../src/kernel/Owner.ts"
import { isReady, request, signUp, waitForSession } from "../../support/Client.ts"
import { SECRETS_KEY, startNode } from "../../support/Nodes.ts"
import * as TestService from "../../support/TestService.ts"

// A node-hop token copied off the wire between nodes: it opened the one request it was made for,
// and opens nothing else: not that request again, not another route of its purpose (a sandbox's
// file download running a command), not another method.

/** What another node of the cluster mints: the same key, another node's name. */
const relayingNode = NodeHop.layer.pipe(
  Layer.provideMerge(Secrets.layer),
  Layer.provide(ServiceConfig.layer({ secretsKey: SECRETS_KEY, nodeId: "relaying-node", logLevel: "Error" }))
)

describe("node-hop tokens", () => {
  it.live("open one request, once: a replay, another route of the purpose or another node is 401", () =>
    Effect.gen(function* () {
      const databaseUrl = yield* TestService.freshDatabase
      const node = yield* startNode(databaseUrl)
      const account = yield* signUp(node.baseUrl)
      const created = yield* request(node.baseUrl, "POST", "/v1/sessions", {
        key: account.key,
        body: { session_type: "sandbox" }
      })
      assert.strictEqual(created.status, 201, JSON.stringify(created.json))
      const id = created.json.id as string
      yield* waitForSession(node.baseUrl, account.key, id, isReady)
      const accountId = (yield* request(node.baseUrl, "GET", "/v1/accounts/current", { key: account.key }))
        .json.account.id as string
      const hop = yield* Effect.provide(Effect.service(NodeHop), relayingNode)
      const vouched = { owner: systemOwner(accountId), origin: { ip: "192.0.2.1", userAgent: null } }
      const call = (method: string, path: string, token: Record<string, string>, body?: object) =>
        request(node.baseUrl, method, path, { headers: token, ...(body === undefined ? {} : { body }) })

      // A file download's token: good for that download.
      const downloadPath = `/internal/v1/sessions/${id}/download?path=/etc/hostname`
      const download = (yield* hop.request(node.baseUrl, "GET", downloadPath, id, "sandbox", vouched)).headers
      assert.strictEqual((yield* call("GET", downloadPath, download)).status, 200)
      // Replayed: refused.
      const replay = yield* call("GET", downloadPath, download)
      assert.strictEqual(replay.status, 401, replay.text)
      // Another route of the same purpose (an upload), with a fresh download token: refused, nothing written.
      const another = (yield* hop.request(node.baseUrl, "GET", downloadPath, id, "sandbox", vouched)).headers
      const upload = yield* call("POST", `/internal/v1/sessions/${id}/upload`, another, {
        path: "/tmp/pwned"
      })
      assert.strictEqual(upload.status, 401, upload.text)
      // No command runs over the hop at all: exec is a call of the session's actor, not a route here.
      const execToken = (yield* hop.request(
        node.baseUrl,
        "POST",
        `/internal/v1/sessions/${id}/exec`,
        id,
        "sandbox",
        vouched
      )).headers
      const exec = yield* call("POST", `/internal/v1/sessions/${id}/exec`, execToken, {
        command: "touch /tmp/pwned"
      })
      assert.strictEqual(exec.status, 404, exec.text)
      // Refused for what it was not made for, it still opens what it was: once.
      assert.strictEqual((yield* call("GET", downloadPath, another)).status, 200)
      // A token for another node (the same session, path and method): refused here.
      const elsewhere = (yield* hop.request(
        "http://127.0.0.1:1",
        "GET",
        downloadPath,
        id,
        "sandbox",
        vouched
      )).headers
      assert.strictEqual((yield* call("GET", downloadPath, elsewhere)).status, 401)
      // None of it ran a command or wrote a file.
      const listed = yield* request(node.baseUrl, "GET", `/v1/sessions/${id}/commands`, { key: account.key })
      assert.deepStrictEqual(listed.json.data, [], "no command ran")
      const written = yield* request(node.baseUrl, "GET", `/v1/sessions/${id}/download?path=/tmp/pwned`, {
        key: account.key
      })
      assert.strictEqual(written.status, 404, "no file written")
    }).pipe(Effect.scoped)
  )
})
