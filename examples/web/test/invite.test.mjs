// The invitation e-mail's link, opened as the invitee would: the page the
// server itself serves at /invite/accept (the default mail.public_url)
// accepts the invitation. Run by tests/tests/integration/web.rs, which
// passes INVITE_URL (the link read from the outbox) and CHROMIUM.

import { test, after } from "node:test";
import assert from "node:assert/strict";
import { chromium } from "playwright-core";

const { INVITE_URL, CHROMIUM } = process.env;
if (!INVITE_URL || !CHROMIUM) throw new Error("run through the harness");

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
  await page.fill("input[name=first_name]", "Bob");
  await page.fill("input[name=last_name]", "Byte");
  await page.fill("input[name=password]", "a long enough pass phrase");
  await page.click("button");
  await page.waitForSelector("body[data-accepted=true]", { timeout: 15000 });
  const done = await page.textContent("#done");
  assert.match(done, /Welcome, Bob: you have joined as bob-web@example\.com/);
  assert.deepEqual(problems, []);
  // The link is single use: a second acceptance is refused, and said.
  await page.goto(INVITE_URL);
  await page.fill("input[name=first_name]", "Bob");
  await page.fill("input[name=last_name]", "Byte");
  await page.fill("input[name=password]", "a long enough pass phrase");
  await page.click("button");
  await page.waitForFunction(() => document.getElementById("error").textContent !== "");
  assert.match(await page.textContent("#error"), /invitation_used/);
});
