// The API reference (`/docs`) in headless Chromium with the network
// restricted to the server: the page renders the document, and no request
// goes to, or is even attempted towards, any other host (no CDN logo, no
// telemetry collector). Run by tests/tests/integration/web.rs, which passes
// API_URL and CHROMIUM.

import { test, after } from "node:test";
import assert from "node:assert/strict";
import { chromium } from "playwright-core";

const { API_URL, CHROMIUM } = process.env;
if (!API_URL || !CHROMIUM) throw new Error("run through the harness");

const browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
after(() => browser.close());

test("/docs renders the reference and asks no other host", async () => {
  const server = new URL(API_URL).origin;
  const context = await browser.newContext();
  const elsewhere = [];
  // The network: the server only; anything else is recorded and refused.
  await context.route("**/*", (route) => {
    const url = route.request().url();
    if (new URL(url).origin === server || url.startsWith("data:") || url.startsWith("blob:")) return route.continue();
    elsewhere.push(url);
    return route.abort("blockedbyclient");
  });
  const page = await context.newPage();
  // Attempts the page's content security policy stopped before the network.
  const refused = [];
  page.on("console", (m) => {
    if (/Content Security Policy|Refused to/i.test(m.text())) refused.push(m.text());
  });
  page.on("pageerror", (e) => refused.push(`page error: ${e.message}`));

  // The root redirects to the reference.
  const response = await page.goto(`${server}/`);
  assert.equal(new URL(page.url()).pathname, "/docs");
  assert.equal(response.status(), 200);

  // Rendered: the document's title and an operation of it.
  await page.waitForSelector("h1", { timeout: 30000 });
  assert.match(await page.textContent("h1"), /Workspace/);
  await page.waitForFunction(() => document.body.textContent.includes("/api/agents/list"), null, { timeout: 30000 });
  // Time for deferred work (telemetry is sent after load).
  await page.waitForTimeout(2000);

  // Markdown the page shows as typed (Redoc renders descriptions as
  // Markdown, but not every one: the servers' is plain text).
  const raw = await page.evaluate(() => {
    const out = [];
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      if (/`[^`]+`/.test(n.textContent)) out.push(n.textContent.slice(0, 120));
    }
    return out;
  });
  assert.deepEqual(raw, [], "text shown with raw backticks");

  assert.deepEqual(elsewhere, [], "requests to other hosts");
  assert.deepEqual(refused, [], "requests the page's policy refused, or errors");
  await context.close();
});
