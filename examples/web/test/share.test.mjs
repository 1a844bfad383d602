// A chat's share link, opened as its reader would: the page the server
// itself serves at /share/<token> shows the snapshot as text (a message
// that looks like HTML stays text), under its strict Content-Security-Policy
// (no console error), and a revoked link says it does not work. Run by
// tests/tests/integration/chat_share.rs, which passes SHARE_URL,
// REVOKED_URL, CHROMIUM and SCREENSHOT.

import { test, after } from "node:test";
import assert from "node:assert/strict";
import { chromium } from "playwright-core";

const { SHARE_URL, REVOKED_URL, CHROMIUM, SCREENSHOT } = process.env;
if (!SHARE_URL || !REVOKED_URL || !CHROMIUM) throw new Error("run through the harness");

const browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
after(() => browser.close());

function watch(page) {
  const problems = [];
  page.on("console", (m) => {
    if (m.type() === "error") problems.push(m.text());
  });
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  return problems;
}

test("the link shows the shared chat as text", async () => {
  const page = await browser.newPage();
  const problems = watch(page);
  const requests = [];
  page.on("request", (r) => requests.push(r));
  const response = await page.goto(SHARE_URL);
  assert.equal(response.status(), 200);
  await page.waitForSelector("body[data-loaded=true]", { timeout: 15000 });
  assert.equal(await page.textContent("#title"), "Shared trip");
  const messages = await page.$$eval("article.message", (items) => items.map((i) => i.className));
  assert.deepEqual(messages, ["message USER", "message MODEL"]);
  const first = await page.textContent("article.USER");
  assert.match(first, /<img src=x onerror="window\.pwned=1">Where is the lighthouse\?/);
  assert.equal(await page.$("article img"), null, "a message is never HTML");
  assert.equal(await page.evaluate(() => window.pwned), undefined);
  assert.match(await page.textContent("article.MODEL"), /offline-dev-model/);
  // The API call sends no Referer (the page's URL holds the token).
  const api = requests.find((r) => r.url().includes("/api/shared?token="));
  assert.ok(api, "the page called the API");
  assert.equal((await api.allHeaders())["referer"], undefined);
  assert.deepEqual(problems, []);
  if (SCREENSHOT) await page.screenshot({ path: SCREENSHOT, fullPage: true });
});

test("a revoked link says it does not work", async () => {
  const page = await browser.newPage();
  watch(page);
  await page.goto(REVOKED_URL);
  await page.waitForSelector("body[data-loaded=error]", { timeout: 15000 });
  assert.match(await page.textContent("#error"), /revoked, or the chat was deleted/);
  assert.equal(await page.$("article.message"), null);
});
