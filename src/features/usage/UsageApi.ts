import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { requires } from "../policy/Access.ts"
import { Authenticate, Authorize } from "../policy/AuthMiddleware.ts"
import { UsageReport } from "../../kernel/Usage.ts"

export class UsageApi extends HttpApiGroup.make("usage")
  .add(
    HttpApiEndpoint.get("current", "/v1/usage", { success: UsageReport })
      .annotateMerge(requires("billing.read"))
      .annotate(
        OpenApi.Description,
        "Usage of the current billing period, the calendar month in UTC, from its first instant to now. A session counts on the UTC day it was created, with the bytes its egress proxy counted (live for running sessions) and `billed_micro_usd`, what it was charged when it ended (the ledger's debits, to the micro-dollar; 0 while it runs). `by_key` lists the key that created each session; sessions made through the library, or by a key since removed, are under `key_id` null. `by_day` has every day of the period so far, days without sessions at zero."
      )
  )
  .middleware(Authorize)
  .middleware(Authenticate)
  .annotate(OpenApi.Title, "Usage") {}
