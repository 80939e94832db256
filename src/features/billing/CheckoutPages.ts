import type { Checkout } from "../../kernel/Billing.ts"

const escape = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)

const layout = (title: string, body: string) =>
  `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">` +
  `<title>${escape(title)}</title><style>body{font:16px system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem}` +
  `button{font:inherit;padding:.6rem 1.4rem;cursor:pointer}</style></head><body>${body}</body></html>`

/** The local checkout: the amount and one form with one button. */
export const checkoutPage = (checkout: Checkout) =>
  checkout.status === "completed"
    ? paidPage(checkout, undefined)
    : layout(
        `Top up ${checkout.amount_usd} USD`,
        `<h1>Top up ${checkout.amount_usd} USD</h1>` +
          `<p>This adds ${checkout.amount_usd} USD to your prepaid balance for browser sessions.</p>` +
          `<form method="post" action="/billing/checkout/${escape(checkout.id)}">` +
          `<button type="submit">Pay ${checkout.amount_usd} USD</button></form>`
      )

export const paidPage = (checkout: Checkout, balanceUsd: string | undefined) =>
  layout(
    "Top-up complete",
    `<h1>Top-up complete</h1><p>${checkout.amount_usd} USD has been added to your balance.</p>` +
      (balanceUsd === undefined
        ? ""
        : `<p>Your balance is now <strong>${escape(balanceUsd)} USD</strong>.</p>`) +
      `<p><a href="/#/billing">Back to the dashboard</a></p>`
  )

export const pendingPage = (checkout: Checkout) =>
  layout(
    "Payment pending",
    `<h1>Payment pending</h1><p>The top-up of ${checkout.amount_usd} USD is not confirmed yet. ` +
      `Reload this page in a moment.</p>`
  )
