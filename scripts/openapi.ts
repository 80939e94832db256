// `npm run openapi`: writes docs/openapi.json, the OpenAPI document the service serves at
// /api-docs/openapi.json, byte for byte (a test fails when the committed one is stale).
import { OpenApi } from "effect/http-api"
import * as Fs from "node:fs"
import { Api } from "../src/edge/http/Api.ts"

export const document = () => JSON.stringify(OpenApi.fromApi(Api))

if (import.meta.main) {
  Fs.writeFileSync(new URL("../docs/openapi.json", import.meta.url), document())
  process.stdout.write("wrote docs/openapi.json\n")
}
