import * as Fs from "node:fs"
import puppeteer from "puppeteer-core"
import { serveLocalPage } from "./session-lifecycle/LocalPage.ts"
import { call, createSession, json, signUp, sleep, startChildProcess } from "./session-lifecycle/TargetService.ts"
const page = await serveLocalPage()
const service = await startChildProcess({ BROWSER_POOL_SIZE: "1", LIMIT_SCREENSHOTS_PER_MINUTE: "100000" }, "/usr/bin/chromium")
const cpu = () => { let ns = 0; for (const t of Fs.readdirSync(`/proc/${service.pid}/task`)) { try { ns += Number(Fs.readFileSync(`/proc/${service.pid}/task/${t}/schedstat`, "utf8").split(" ")[0]) } catch {} } return ns / 1e6 }
try {
  const key = await signUp(service.baseUrl)
  const s: any = json((await createSession(service.baseUrl, key)).bytes)
  const browser = await puppeteer.connect({ browserWSEndpoint: s.cdp_url, headers: { Authorization: `Bearer ${key}` }, defaultViewport: null })
  await (await browser.pages())[0]!.goto(page.url)
  await browser.disconnect()
  for (let i = 0; i < 30; i++) await call(service.baseUrl, "POST", `/v1/sessions/${s.id}/screenshot`, { key })
  await sleep(1000)
  const N = Number(process.env.N ?? 200)
  const a = cpu(); let bytes = 0
  for (let i = 0; i < N; i++) { const r = await call(service.baseUrl, "POST", `/v1/sessions/${s.id}/screenshot`, { key }); if (r.status !== 200) throw new Error(String(r.status)); bytes = r.bytes.length }
  console.log(`screenshot: ${((cpu() - a) / N).toFixed(2)} ms service CPU each, ${bytes} bytes`)
  const b = cpu()
  for (let i = 0; i < N; i++) await call(service.baseUrl, "GET", `/v1/sessions/${s.id}`, { key })
  console.log(`GET session: ${((cpu() - b) / N).toFixed(2)} ms service CPU each`)
} finally { await service.stop(); await page.close() }
