// The invitation e-mail's link, opened as the invitee would: the page the
// server itself serves at /invite/accept (the default mail.public_url)
// accepts the invitation. Run by tests/tests/integration/web.rs, which
// passes INVITE_URL (the link read from the outbox) and CHROMIUM.

import { test, after } from "node:test";
import assert from "node:assert/strict";
import { chromium } from "playwright-core";

const { INVITE_URL, EXISTING_INVITE_URL, CHROMIUM } = process.env;
if (!INVITE_URL || !EXISTING_INVITE_URL || !CHROMIUM) throw new Error("run through the harness");

const browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
after(() => browser.close());

test("the e-mail's link opens a page that accepts the invitation", async () => {
  const page = await browser.newPage();
  const problems = [];
  page.on("console", (m) => {
    if (m.type() === "error") problems.push(m.text());
  });
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  const response = await page.goto(INVITE_URL);
  assert.equal(response.status(), 200);
  await page.waitForSelector("body[data-ready=true]", { timeout: 15000 });
  assert.equal(await page.isVisible("input[name=first_name]"), true);
  await page.fill("input[name=first_name]", "Bob");
  await page.fill("input[name=last_name]", "Byte");
  await page.fill("input[name=password]", "a long enough pass phrase");
  await page.click("button");
  await page.waitForSelector("body[data-accepted=true]", { timeout: 15000 });
  const done = await page.textContent("#done");
  assert.match(done, /Welcome, Bob: your account bob-web@example\.com is ready/);
  assert.deepEqual(problems, []);
  // The link is single use: opened again, the page says so and offers no form.
  await page.goto(INVITE_URL);
  await page.waitForFunction(() => document.getElementById("error").textContent !== "");
  assert.match(await page.textContent("#error"), /can no longer be accepted/);
  assert.equal(await page.isVisible("#accept"), false);
});

test("an address with an account is asked only for its password, and joins", async () => {
  const page = await browser.newPage();
  const problems = [];
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  await page.goto(EXISTING_INVITE_URL);
  await page.waitForSelector("body[data-existing-account=true]", { timeout: 15000 });
  assert.equal(await page.isVisible("input[name=first_name]"), false);
  assert.equal(await page.isVisible("input[name=last_name]"), false);
  assert.match(await page.textContent("#intro"), /already has an account/);
  await page.fill("input[name=password]", "correct horse battery staple");
  await page.click("button");
  await page.waitForSelector("body[data-accepted=true]", { timeout: 15000 });
  const done = await page.textContent("#done");
  assert.match(done, /You have joined .* as carol-web@example\.com/);
  assert.doesNotMatch(done, /Welcome|signed up|ready/);
  assert.deepEqual(problems, []);
});
