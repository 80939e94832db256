// A local stand-in for Stripe's API, run as its own process: it answers the
// official SDK in Stripe's wire format (form-encoded requests, JSON objects,
// Stripe's error shape) and signs webhook deliveries as Stripe does, with the
// SDK's own signing helper. Control routes under /_control drive a payment.
import * as Crypto from "node:crypto"
import * as Http from "node:http"
import type * as Net from "node:net"
import Stripe from "stripe"

const secretKey = process.env.FAKE_STRIPE_KEY ?? "sk_test_fake"
const webhookSecret = process.env.FAKE_STRIPE_WEBHOOK_SECRET ?? "whsec_fake"
const stripe = new Stripe(secretKey)

interface Session {
  id: string
  object: "checkout.session"
  amount_total: number
  currency: string
  client_reference_id: string | null
  customer_email: string | null
  metadata: Record<string, string>
  mode: string
  payment_status: "unpaid" | "paid"
  status: "open" | "complete"
  success_url: string
  cancel_url: string
  url: string
  created: number
}

const sessions = new Map<string, Session>()
const events = new Map<string, string>()
const requests: Array<{ method: string; path: string; authorized: boolean; body: Record<string, string> }> =
  []
let base = ""

const readBody = (request: Http.IncomingMessage) =>
  new Promise<string>((resolve) => {
    let body = ""
    request.on("data", (chunk) => (body += chunk))
    request.on("end", () => resolve(body))
  })

const json = (response: Http.ServerResponse, status: number, body: unknown) => {
  response.writeHead(status, {
    "content-type": "application/json",
    "request-id": `req_${Crypto.randomUUID()}`
  })
  response.end(JSON.stringify(body))
}

const deliver = async (url: string, payload: string, signature: string) => {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json; charset=utf-8", "stripe-signature": signature },
    body: payload
  })
  return { status: response.status, body: await response.text() }
}

const eventFor = (session: Session, type: string) => {
  const event = {
    id: `evt_${Crypto.randomBytes(12).toString("hex")}`,
    object: "event",
    api_version: "2025-01-27.acacia",
    created: Math.floor(Date.now() / 1000),
    type,
    livemode: false,
    pending_webhooks: 1,
    request: { id: null, idempotency_key: null },
    data: { object: session }
  }
  const payload = JSON.stringify(event, null, 2)
  events.set(event.id, payload)
  return { id: event.id, payload }
}

const server = Http.createServer(async (request, response) => {
  const url = new URL(request.url ?? "/", "http://x")
  const body = await readBody(request)
  if (url.pathname.startsWith("/_control/")) {
    const target = url.searchParams.get("webhook_url") ?? ""
    if (url.pathname === "/_control/requests") return json(response, 200, requests)
    if (url.pathname === "/_control/pay") {
      const session = sessions.get(url.searchParams.get("session") ?? "")
      if (session === undefined) return json(response, 404, { error: "no such session" })
      session.payment_status = "paid"
      session.status = "complete"
      const event = eventFor(session, "checkout.session.completed")
      const signature = stripe.webhooks.generateTestHeaderString({
        payload: event.payload,
        secret: webhookSecret
      })
      return json(response, 200, {
        event: event.id,
        delivery: await deliver(target, event.payload, signature)
      })
    }
    if (url.pathname === "/_control/replay") {
      const payload = events.get(url.searchParams.get("event") ?? "")
      if (payload === undefined) return json(response, 404, { error: "no such event" })
      const signature = stripe.webhooks.generateTestHeaderString({ payload, secret: webhookSecret })
      return json(response, 200, { delivery: await deliver(target, payload, signature) })
    }
    if (url.pathname === "/_control/forge") {
      const session = sessions.get(url.searchParams.get("session") ?? "")
      if (session === undefined) return json(response, 404, { error: "no such session" })
      const event = eventFor(
        { ...session, payment_status: "paid", status: "complete" },
        "checkout.session.completed"
      )
      const signature = stripe.webhooks.generateTestHeaderString({
        payload: event.payload,
        secret: "whsec_not_the_secret"
      })
      return json(response, 200, { delivery: await deliver(target, event.payload, signature) })
    }
    if (url.pathname === "/_control/other-event") {
      const event = eventFor(sessions.values().next().value!, "customer.created")
      const signature = stripe.webhooks.generateTestHeaderString({
        payload: event.payload,
        secret: webhookSecret
      })
      return json(response, 200, { delivery: await deliver(target, event.payload, signature) })
    }
    return json(response, 404, { error: "unknown control route" })
  }

  const form = Object.fromEntries(new URLSearchParams(body))
  const authorized = request.headers.authorization === `Bearer ${secretKey}`
  requests.push({ method: request.method ?? "", path: url.pathname, authorized, body: form })
  if (!authorized) {
    return json(response, 401, {
      error: { type: "invalid_request_error", message: "Invalid API Key provided." }
    })
  }
  if (request.method === "POST" && url.pathname === "/v1/checkout/sessions") {
    const quantity = Number(form["line_items[0][quantity]"] ?? "1")
    const unitAmount = Number(form["line_items[0][price_data][unit_amount]"])
    if (!Number.isInteger(unitAmount) || form.mode !== "payment") {
      return json(response, 400, {
        error: {
          type: "invalid_request_error",
          message: "Missing required param: line_items[0][price_data][unit_amount]."
        }
      })
    }
    const metadata: Record<string, string> = {}
    for (const [key, value] of Object.entries(form)) {
      const match = /^metadata\[(.+)\]$/.exec(key)
      if (match) metadata[match[1]!] = value
    }
    const id = `cs_test_${Crypto.randomBytes(16).toString("hex")}`
    const session: Session = {
      id,
      object: "checkout.session",
      amount_total: unitAmount * quantity,
      currency: form["line_items[0][price_data][currency]"] ?? "usd",
      client_reference_id: form.client_reference_id ?? null,
      customer_email: form.customer_email ?? null,
      metadata,
      mode: "payment",
      payment_status: "unpaid",
      status: "open",
      success_url: form.success_url ?? "",
      cancel_url: form.cancel_url ?? "",
      url: `${base}/pay/${id}`,
      created: Math.floor(Date.now() / 1000)
    }
    sessions.set(id, session)
    return json(response, 200, session)
  }
  return json(response, 404, {
    error: {
      type: "invalid_request_error",
      message: `Unrecognized request URL (${request.method}: ${url.pathname}).`
    }
  })
})

server.listen(0, "127.0.0.1", () => {
  base = `http://127.0.0.1:${(server.address() as Net.AddressInfo).port}`
  process.stdout.write(`${base}\n`)
})
process.on("SIGTERM", () => server.close(() => process.exit(0)))
