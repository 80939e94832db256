import * as Fs from "node:fs"
import puppeteer from "puppeteer-core"
import { serveLocalPage } from "./session-lifecycle/LocalPage.ts"
import { call, createSession, json, readyz, signUp, sleep, startChildProcess } from "./session-lifecycle/TargetService.ts"
const N = Number(process.env.N ?? 20)
const KIND = (process.env.KIND ?? "browser") as "browser" | "context"
const page = await serveLocalPage()
const service = await startChildProcess({ BROWSER_POOL_SIZE: "1", LIMIT_SESSION_CREATES_PER_MINUTE: "100000" }, "/usr/bin/chromium")
const cpu = () => { let ns = 0; for (const t of Fs.readdirSync(`/proc/${service.pid}/task`)) { try { ns += Number(Fs.readFileSync(`/proc/${service.pid}/task/${t}/schedstat`, "utf8").split(" ")[0]) } catch {} } return ns / 1e6 }
const phases = new Map<string, [number, number]>()
const add = (k: string, c: number, w: number) => { const p = phases.get(k) ?? [0, 0]; phases.set(k, [p[0] + c, p[1] + w]) }
const quiet = () => sleep(1500)
try {
  const key = await signUp(service.baseUrl)
  const one = async (measure: boolean) => {
    if (KIND === "browser") await quiet()
    let t = cpu(); let w = performance.now(); const mark = (k: string) => { const n = cpu(); const nw = performance.now(); if (measure) add(k, n - t, nw - w); t = n; w = nw }
    const created = await createSession(service.baseUrl, key, KIND); const s: any = json(created.bytes); mark("1 create (HTTP)")
    const browser = await puppeteer.connect({ browserWSEndpoint: s.cdp_url, headers: { Authorization: `Bearer ${key}` }, defaultViewport: null }); mark("2 puppeteer.connect (waits ready)")
    const tab = (await browser.pages())[0]!; mark("3 pages()")
    await tab.goto(page.url); mark("4 goto")
    const shot = await call(service.baseUrl, "POST", `/v1/sessions/${s.id}/screenshot`, { key }); if (shot.status !== 200) throw new Error("shot"); mark("5 screenshot (REST)")
    await browser.disconnect(); mark("6 disconnect")
    const del = await call(service.baseUrl, "DELETE", `/v1/sessions/${s.id}`, { key }); if (del.status !== 204) throw new Error("del"); mark("7 delete (HTTP)")
    if (KIND === "browser") { await quiet(); mark("8 teardown+refill (until quiet)") }
  }
  for (let i = 0; i < 3; i++) await one(false)
  for (let i = 0; i < N; i++) await one(true)
  let total = [0, 0]
  for (const [k, v] of [...phases].sort()) { console.log(`${k.padEnd(36)} cpu ${(v[0] / N).toFixed(1)} ms  wall ${(v[1] / N).toFixed(1)} ms`); total[0] += v[0] / N; total[1] += v[1] / N }
  console.log(`total cpu ${total[0].toFixed(1)} wall ${total[1].toFixed(1)} ms`)
} finally { await service.stop(); await page.close() }
