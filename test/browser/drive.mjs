// drive.mjs — runs Debian's Chromium (headless) through playwright-core for
// test/browser. Not a test by itself: browser_test.go starts it and talks
// to it over stdin/stdout, one JSON object per line.
//
//   node drive.mjs --page URL [--chromium /usr/bin/chromium] [--screenshot PATH]
//
// stdout: {"ready":true,"userAgent":"..."} once the page has loaded, then
// one answer per command:
//   {"id":N,"eval":"<JS expression, may be a promise>"} -> {"id":N,"value":...}
//   {"id":N,"screenshot":"<path>"}                       -> {"id":N,"value":true}
//   {"id":N,"close":true}                                -> {"id":N,"value":true}, exit
// (or {"id":N,"error":"..."}). The page's console and errors go to stderr.
// EOF on stdin closes the browser too.

import { createInterface } from "node:readline";
import { chromium } from "playwright-core";

function arg(name, def) {
  const i = process.argv.indexOf("--" + name);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : def;
}

const pageURL = arg("page");
const executablePath = arg("chromium", process.env.CHRONOQ_CHROMIUM || "/usr/bin/chromium");
const defaultShot = arg("screenshot", "");
if (!pageURL) {
  console.error("usage: node drive.mjs --page URL [--chromium PATH] [--screenshot PATH]");
  process.exit(2);
}

const out = (m) => process.stdout.write(JSON.stringify(m) + "\n");

let browser;
let closing = false;
async function shutdown(code) {
  if (closing) return;
  closing = true;
  try {
    await browser?.close();
  } catch {
    // already gone
  }
  process.exit(code);
}
process.on("SIGTERM", () => shutdown(0));
process.on("SIGINT", () => shutdown(0));

try {
  browser = await chromium.launch({
    executablePath,
    headless: true,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-background-networking",
      "--disable-gpu",
      "--disable-dev-shm-usage",
    ],
    timeout: 30000,
  });
} catch (err) {
  out({ fatal: "launch chromium (" + executablePath + "): " + (err && err.message) });
  process.exit(1);
}

const page = await browser.newPage({ viewport: { width: 1100, height: 640 } });
page.on("console", (m) => process.stderr.write(`console.${m.type()}: ${m.text()}\n`));
page.on("pageerror", (e) => process.stderr.write(`pageerror: ${e && e.stack || e}\n`));
page.on("requestfailed", (r) => {
  // The test cuts connections on purpose; log them all the same.
  process.stderr.write(`requestfailed: ${r.url()} ${r.failure()?.errorText}\n`);
});

try {
  await page.goto(pageURL, { waitUntil: "load", timeout: 20000 });
  await page.waitForFunction(() => window.pageReady === true, null, { timeout: 10000 });
} catch (err) {
  out({ fatal: "open " + pageURL + ": " + (err && err.message) });
  await shutdown(1);
}
out({ ready: true, userAgent: await page.evaluate(() => navigator.userAgent) });

const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of rl) {
  if (!line.trim()) continue;
  let cmd;
  try {
    cmd = JSON.parse(line);
  } catch (err) {
    out({ id: 0, error: "bad command: " + err.message });
    continue;
  }
  try {
    if (cmd.eval !== undefined) {
      const value = await page.evaluate(cmd.eval);
      out({ id: cmd.id, value: value === undefined ? null : value });
    } else if (cmd.screenshot !== undefined) {
      await page.screenshot({ path: cmd.screenshot || defaultShot, fullPage: true });
      out({ id: cmd.id, value: true });
    } else if (cmd.close) {
      out({ id: cmd.id, value: true });
      await shutdown(0);
    } else {
      out({ id: cmd.id, error: "unknown command" });
    }
  } catch (err) {
    out({ id: cmd.id, error: String(err && err.message || err) });
  }
}
await shutdown(0);
