// dash.mjs — drives the dashboard in Debian's Chromium through
// playwright-core (test/browser's node_modules) for dashboard_test.go.
//
//   node dash.mjs --admin URL --api URL --token T --chromium PATH --out DIR
//
// stdout: one JSON object per line: {"step":"..."} for each check that
// passed, {"fail":"..."} for one that did not (then exit 1). The page's
// console and errors go to stderr. Each wait is bounded (5–15 s).

import { createRequire } from "node:module";
import path from "node:path";

const require = createRequire(new URL("../browser/package.json", import.meta.url));
const { chromium } = require("playwright-core");

function arg(name, def) {
  const i = process.argv.indexOf("--" + name);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : def;
}
const admin = arg("admin"), mainAPI = arg("api"), token = arg("token"), out = arg("out", ".");
const executablePath = arg("chromium", "/usr/bin/chromium");
const say = (m) => process.stdout.write(JSON.stringify(m) + "\n");
const step = (name, detail) => say({ step: name, detail: detail || "" });

class Fail extends Error {}
function check(cond, msg) { if (!cond) throw new Fail(msg); }

// outside calls: the main listener, like any client
async function call(method, p, body) {
  const r = await fetch(mainAPI + p, {
    method, headers: { Authorization: "Bearer " + token, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  return { status: r.status, body: text ? JSON.parse(text) : null };
}

const browser = await chromium.launch({
  executablePath, headless: true, timeout: 30000,
  args: ["--headless", "--no-sandbox", "--disable-background-networking", "--disable-gpu", "--disable-dev-shm-usage"],
});
const ctx = await browser.newContext({ viewport: { width: 1366, height: 800 }, colorScheme: "light", timezoneId: "Europe/Berlin", locale: "en-GB" });
const page = await ctx.newPage();
page.setDefaultTimeout(8000);
page.on("console", (m) => process.stderr.write(`console.${m.type()}: ${m.text()}\n`));
page.on("pageerror", (e) => process.stderr.write(`pageerror: ${(e && e.stack) || e}\n`));
page.on("dialog", (d) => d.accept("dashboard test"));
const shot = async (name) => {
  await page.evaluate(() => document.getElementById("toast").replaceChildren()); // earlier steps' notices
  await page.screenshot({ path: path.join(out, name + ".png"), fullPage: true });
};
const text = (sel) => page.locator(sel).first().innerText();
const numOf = async (sel) => Number((await text(sel)).replace(/[^\d]/g, ""));
const goto = async (hash, ready) => {
  await page.evaluate((h) => { window.dashboardReady = false; location.hash = h; }, hash);
  await page.waitForFunction(() => window.dashboardReady === true);
  if (ready) await page.locator(ready).first().waitFor();
};

let code = 0;
try {
  // ---- a wrong admin token is refused
  await page.goto(admin + "/ui/", { waitUntil: "load" });
  await page.locator("#login[open]").waitFor();
  await page.fill("#login-token", "not-the-admin-token-at-all");
  await page.click("#login-submit");
  await page.locator("#login-error").filter({ hasText: "Refused" }).waitFor();
  check(await page.locator("#login[open]").count() === 1, "login dialog closed after a wrong token");
  check(await page.evaluate(() => sessionStorage.length) === 0, "a refused token was stored");
  const direct = await fetch(admin + "/admin/stats", { headers: { Authorization: "Bearer wrong-token-0123456789" } });
  check(direct.status === 401, `GET /admin/stats with a wrong token: ${direct.status}, want 401`);
  const proxied = await fetch(admin + "/ui/api/v1/ns/default/queues");
  check(proxied.status === 401, `GET /ui/api/v1/... without a token: ${proxied.status}, want 401`);
  await shot("login");
  step("wrong token refused");

  // ---- sign in; the overview
  await page.fill("#login-token", token);
  await page.click("#login-submit");
  await page.locator("#state-ready .v").waitFor();
  await page.waitForFunction(() => document.querySelectorAll(".uplot").length === 2);
  check(await page.evaluate(() => sessionStorage.getItem("chronoq.adminToken")) !== null, "token not kept in session storage");
  check(!(await page.evaluate(() => document.cookie)), "the page set a cookie");
  const ready0 = await numOf("#state-ready .v");
  check(ready0 >= 30, `overview: ready ${ready0}, want at least 30`);
  check((await numOf("#state-delayed .v")) >= 46, "overview: delayed jobs missing");
  check((await numOf("#state-dead .v")) >= 1, "overview: dead job missing");
  step("overview", `ready ${ready0}`);

  // ---- live counts follow puts from outside (SSE, no reload)
  await page.evaluate(() => { window.__marker = 1; });
  const jobs = Array.from({ length: 7 }, (_, i) => ({ payload: { live: i } }));
  const put = await call("POST", "/v1/ns/default/queues/live/jobs/batch", { jobs });
  check(put.status < 300, "outside put failed: " + put.status + " " + JSON.stringify(put.body));
  await page.waitForFunction((want) => Number(document.querySelector("#state-ready .v").innerText.replace(/[^\d]/g, "")) >= want, ready0 + 7, { timeout: 6000 });
  check(await page.evaluate(() => window.__marker) === 1, "the page reloaded");
  step("live counts", `${ready0} -> ${await numOf("#state-ready .v")}`);
  // a few seconds of chart (longer when CHRONOQ_DASHBOARD_CHART_WAIT asks,
  // for the screenshots of docs/dashboard.md)
  await page.waitForTimeout(1000 * Number(process.env.CHRONOQ_DASHBOARD_CHART_WAIT || 4));
  await shot("overview");
  await page.emulateMedia({ colorScheme: "dark" });
  await goto("#/overview", "#state-ready .v");
  await page.waitForTimeout(1500);
  await shot("overview-dark");
  await page.emulateMedia({ colorScheme: "light" });

  // ---- queues
  await goto("#/queues", "#queues tr[data-queue=emails]");
  for (const q of ["emails", "payments", "reports", "thumbnails", "scratch", "live"]) {
    check(await page.locator(`#queues tr[data-queue="${q}"]`).count() === 1, `queues: ${q} missing`);
  }
  check((await text('#queues tr[data-queue="thumbnails"]')).includes("paused"), "queues: thumbnails not shown paused");
  // sorting by dead puts payments first
  // (the table is re-rendered by its live refresh: a click on a header
  // replaced meanwhile is clicked again, and the order is awaited, bounded)
  const sortedByDead = () => page.waitForFunction(() => (document.querySelector("#queues th.sorted-desc")?.innerText || "").includes("Dead"), null, { timeout: 2000 }).then(() => true, () => false);
  for (let i = 0; i < 3; i++) {
    await page.click("#queues th:has-text('Dead')");
    if (await sortedByDead()) break;
  }
  const paymentsFirst = await page.waitForFunction(() => document.querySelector("#queues tbody tr")?.getAttribute("data-queue") === "payments", null, { timeout: 3000 }).then(() => true, () => false);
  check(paymentsFirst, "sort by dead: payments not first (first row: " + (await page.locator("#queues tbody tr").first().getAttribute("data-queue")) + ")");
  await page.fill("#queue-filter", "pay");
  check(await page.locator("#queues tbody tr").count() === 1, "filter 'pay' shows more than payments");
  await page.fill("#queue-filter", "");
  // live: a put from outside shows up in the queue row
  await call("POST", "/v1/ns/default/queues/scratch/jobs", { payload: "one more" });
  await page.waitForFunction(() => document.querySelector('#queues tr[data-queue="scratch"] td:nth-child(2)').innerText.trim() === "13", null, { timeout: 6000 });
  await shot("queues");
  // pause from the page, then edit the config: a bad value is refused by
  // the API's own validation and changes nothing, a good one is saved
  await page.click('#queues tr[data-queue="emails"] button:has-text("Pause")');
  await page.locator('#queues tr[data-queue="emails"] .badge.paused').waitFor();
  check((await call("GET", "/v1/ns/default/queues/emails")).body.paused === true, "pause from the page did not pause");
  await page.click('#queues tr[data-queue="emails"] button:has-text("Resume")');
  await page.locator('#queues tr[data-queue="emails"] .badge:not(.paused)').waitFor();
  const editConfig = async (fn) => {
    await page.click('#queues tr[data-queue="emails"] button:has-text("Config")');
    await page.locator("#editor[open]").waitFor();
    const cfg = JSON.parse(await page.inputValue("#editor-text"));
    fn(cfg);
    await page.fill("#editor-text", JSON.stringify(cfg));
    await page.click("#editor-ok");
  };
  await editConfig((c) => { c.default_ttr = "banana"; });
  await page.locator("#toast .err", { hasText: "default_ttr" }).waitFor();
  check((await call("GET", "/v1/ns/default/queues/emails")).body.config.default_ttr === "30s", "a refused config changed the queue");
  await editConfig((c) => { c.default_tries = 7; });
  await page.locator("#toast div", { hasText: "Saved the configuration" }).waitFor();
  check((await call("GET", "/v1/ns/default/queues/emails")).body.config.default_tries === 7, "config edit not saved");
  step("queues");

  // ---- purge asks for a typed confirmation
  await page.click('#queues tr[data-queue="scratch"] button[data-action=purge]');
  await page.locator("#confirm[open]").waitFor();
  check(await page.isDisabled("#confirm-ok"), "purge: confirm enabled before typing the name");
  await page.fill("#confirm-typed", "scratc");
  check(await page.isDisabled("#confirm-ok"), "purge: confirm enabled with a wrong name");
  await shot("purge-confirm");
  await page.click("#confirm button[value=cancel]");
  await page.waitForTimeout(300);
  let sq = await call("GET", "/v1/ns/default/queues/scratch");
  check(sq.body.counts.ready === 13, `purge cancelled but scratch has ${sq.body.counts.ready} ready`);
  await page.click('#queues tr[data-queue="scratch"] button[data-action=purge]');
  await page.fill("#confirm-typed", "scratch");
  await page.click("#confirm-ok");
  await page.waitForFunction(() => document.querySelector('#queues tr[data-queue="scratch"] td:nth-child(2)').innerText.trim() === "0", null, { timeout: 6000 });
  sq = await call("GET", "/v1/ns/default/queues/scratch");
  check(sq.body.counts.ready === 0, "scratch not purged");
  step("purge confirmation");

  // ---- jobs: the dead job, its detail, respawn, a worker takes it
  await goto("#/jobs?ns=default&q=payments&state=dead", "#jobs tr[data-id=pay-dead-1]");
  check((await text("#jobs tr[data-id=pay-dead-1]")).includes("card declined"), "dead list: last error missing");
  await shot("jobs-dead");
  await page.click("#jobs tr[data-id=pay-dead-1] a");
  await page.locator("#job-state").filter({ hasText: "dead" }).waitFor();
  check((await text("#payload")).includes('"order": 1001'), "job detail: payload not pretty-printed");
  check((await text("#job-fields")).includes("customer:77"), "job detail: key missing");
  await shot("job-detail");
  await page.click("#respawn");
  await page.locator("#job-state").filter({ hasText: "ready" }).waitFor();
  step("respawn dead job");
  const took = await call("POST", "/v1/ns/default/queues/payments/take", { max: 10 });
  const got = (took.body.jobs || []).find((j) => j.id === "pay-dead-1");
  check(got && got.attempt === 1, `worker take after respawn: ${JSON.stringify(took.body)}`);
  for (const j of took.body.jobs) {
    if (j.id === "pay-dead-1") check((await call("POST", `/v1/ns/default/queues/payments/jobs/${j.id}/ack`, { receipt: j.receipt })).status === 200, "ack failed");
    else await call("POST", `/v1/ns/default/queues/payments/jobs/${j.id}/nack`, { receipt: j.receipt, delay: "0s" });
  }
  step("worker took respawned job");

  // ---- a hostile payload and tag are shown, never run
  await goto("#/jobs?ns=default&q=payments&state=ready", "#jobs tr[data-id=hostile]");
  await goto("#/job?ns=default&q=payments&id=hostile", "#payload");
  const payloadText = await text("#payload");
  check(payloadText.includes("<script>window.__pwned=1</script>"), "hostile payload not shown as text: " + payloadText);
  check((await text("#job-tags")).includes("<b id=tagbold>bold</b>"), "hostile tag not shown as text");
  const pwned = await page.evaluate(() => [window.__pwned, document.getElementById("injected"), document.getElementById("tagbold"), document.querySelectorAll("main script, main img").length]);
  check(pwned[0] === undefined && pwned[1] === null && pwned[2] === null && pwned[3] === 0, "hostile markup became live: " + JSON.stringify(pwned));
  await shot("job-hostile");
  await goto("#/job?ns=default&q=payments&id=binary", "#payload");
  await page.click(".tabs a:has-text('Hex')");
  check((await text("#payload")).includes("00 01 02 03 68 65 6c 6c"), "binary payload: no hex dump");
  await goto("#/channels?ns=default&ch=news", "#tail .msg");
  check(await page.evaluate(() => window.__pwned) === undefined, "hostile channel message ran");
  step("hostile payload inert");

  // ---- channels: list, tail, publish
  check((await text("#channels")).includes("news"), "channels: news missing");
  await page.fill("#publish-data", '{"from":"dashboard test"}');
  await page.click("#publish");
  await page.locator("#tail .msg", { hasText: "dashboard test" }).waitFor({ timeout: 6000 });
  await call("POST", "/v1/ns/default/channels/news/publish", { data: { from: "outside" } });
  await page.locator("#tail .msg", { hasText: "outside" }).waitFor({ timeout: 6000 });
  await shot("channels");
  step("channels");

  // ---- scheduled
  await goto("#/scheduled?ns=default&range=day", "#timeline svg");
  const dots = await page.locator("#timeline circle").count();
  check(dots >= 40, `scheduled: ${dots} activations drawn, want at least 40`);
  check((await page.locator("#upcoming tbody tr").count()) > 5, "scheduled: no upcoming list");
  await shot("scheduled");
  step("scheduled", `${dots} dots`);

  // ---- namespaces & tokens
  await goto("#/namespaces", "#namespaces tr[data-ns=default]");
  await page.fill("#ns-name", "team-a");
  await page.click("button:has-text('Create namespace')");
  await page.locator("#namespaces tr[data-ns=team-a]").waitFor();
  await page.click("#namespaces tr[data-ns=team-a] button:has-text('New token')");
  await page.locator("#new-token .secret").waitFor();
  const tok = await text("#new-token .secret");
  const tr = await fetch(mainAPI + "/v1/ns/team-a/queues", { headers: { Authorization: "Bearer " + tok } });
  check(tr.status === 200, `the new token does not work: ${tr.status}`);
  await shot("namespaces");
  step("namespaces");
} catch (e) {
  say({ fail: e instanceof Fail ? e.message : String((e && e.stack) || e) });
  try { await shot("failure"); } catch { /* the page is gone */ }
  code = 1;
}
await browser.close();
process.exit(code);
