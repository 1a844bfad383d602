// The example page in headless Chromium, on another origin than the API.
// Run by tests/tests/integration/web.rs, which passes API_URL, PAGE_URL
// (an origin the API allows), REFUSED_PAGE_URL (one it does not),
// CHROMIUM (the browser's path), SCREENSHOT (where to save the finished
// conversation), and for the restart test SERVER_BIN, SERVER_CONFIG (the
// server executable and a configuration of it on the same database) and
// RESTART_API_URL (where that configuration listens).

import { test, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { chromium } from "playwright-core";

const { API_URL, PAGE_URL, REFUSED_PAGE_URL, CHROMIUM, SCREENSHOT } = process.env;
const { SERVER_BIN, SERVER_CONFIG, RESTART_API_URL } = process.env;
if (!API_URL || !PAGE_URL || !REFUSED_PAGE_URL || !CHROMIUM || !SERVER_BIN || !SERVER_CONFIG || !RESTART_API_URL) {
  throw new Error("run through the harness");
}

const browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
after(() => browser.close());

const user = { email: `web-${Date.now()}@example.com`, password: "correct horse battery staple" };

async function signedIn(page, url, signup, api = API_URL, who = user) {
  await page.goto(`${url}/?api=${encodeURIComponent(api)}`);
  await page.fill("[name=email]", who.email);
  await page.fill("[name=password]", who.password);
  await page.click(signup ? "button[name=signup]" : "button[name=login]");
  await page.waitForSelector("body[data-ready=true]", { timeout: 30000 });
}

const lastAnswer = (page) => page.locator(".assistant").last();

test("sign up, chat, live titles, a file through a knowledge base, a reload mid-answer", async () => {
  const context = await browser.newContext();
  const page = await context.newPage();
  const refusedCalls = [];
  // Requests the browser refused or that failed (the reload's abort of the
  // stream in flight is not one).
  page.on("requestfailed", (r) => {
    if (r.failure()?.errorText !== "net::ERR_ABORTED") refusedCalls.push(`${r.url()}: ${r.failure()?.errorText}`);
  });
  await signedIn(page, PAGE_URL, true);
  await page.waitForSelector("body[data-live=true]", { timeout: 15000 });

  // A message: its answer streams in, the chat appears with its title (a
  // live update once generated).
  await page.fill("[name=content]", "Hello from a browser");
  await page.click("#send button");
  await page.waitForSelector(".assistant[data-done=true]", { timeout: 30000 });
  assert.match(await lastAnswer(page).textContent(), /You said: "Hello from a browser"/);
  await page.waitForFunction(() => document.querySelectorAll("#chats li").length === 1 && document.querySelector("#chats li").textContent.length > 0);

  // A file, through a knowledge base, then asked about.
  await page.setInputFiles("input[type=file]", {
    name: "facts.md",
    mimeType: "text/markdown",
    buffer: Buffer.from("# Facts\n\nThe password is swordfish.\n"),
  });
  await page.click("#files button");
  await page.waitForFunction(() => ["ready", "failed"].includes(document.getElementById("kb-status").textContent), null, { timeout: 60000 });
  assert.equal(await page.textContent("#kb-status"), "ready");
  await page.check("[name=kb]");
  await page.fill("[name=content]", "What is the password?");
  await page.click("#send button");
  await page.waitForFunction(() => document.querySelectorAll(".assistant[data-done=true]").length === 2, null, { timeout: 30000 });
  assert.ok(Number(await lastAnswer(page).getAttribute("data-sources")) >= 1);
  assert.match(await lastAnswer(page).textContent(), /swordfish/);

  // A long answer, the page reloaded in the middle: it resumes, no text
  // lost or doubled.
  const words = Array.from({ length: 120 }, (_, i) => `word${i}`).join(" ");
  await page.fill("[name=content]", words);
  await page.click("#send button");
  await page.waitForFunction(() => (document.querySelector(".assistant:last-child")?.textContent.length ?? 0) > 80);
  await page.reload();
  await page.waitForSelector(".assistant[data-resumed=true]", { timeout: 15000 });
  await page.waitForSelector(".assistant[data-resumed=true][data-done=true]", { timeout: 60000 });
  const shown = await page.locator(".assistant[data-resumed=true]").textContent();
  const { token, chatId } = await page.evaluate(() => JSON.parse(sessionStorage.getItem("workspace")));
  const orgId = await page.evaluate(() => JSON.parse(sessionStorage.getItem("workspace")).orgId);
  const stored = await (
    await fetch(`${API_URL}/api/chat?org_id=${orgId}&chat_id=${chatId}`, { headers: { authorization: `Bearer ${token}` } })
  ).json();
  const answer = stored.messages.at(-1);
  assert.equal(answer.status, "complete");
  assert.equal(shown, answer.content);
  assert.ok(shown.includes("word0") && shown.includes("word119"));

  await page.screenshot({ path: SCREENSHOT, fullPage: true });
  assert.deepEqual(refusedCalls, []);
  await context.close();
});

test("edit a question, switch between its versions, regenerate, rate and share an answer, search and pin", async () => {
  const context = await browser.newContext();
  const page = await context.newPage();
  const who = { email: `tree-${Date.now()}@example.com`, password: "correct horse battery staple" };
  await signedIn(page, PAGE_URL, true, API_URL, who);
  await page.fill("#send [name=content]", "The first wording");
  await page.click("#send button");
  await page.waitForSelector(".bar button[name=regenerate]", { timeout: 30000 });

  // Edit: a second version of the question, answered.
  await page.locator(".bar button[name=edit]").first().click();
  await page.fill("form.edit [name=content]", "The second wording");
  await page.click("form.edit button[name=save]");
  const shows = (text, pos) =>
    page.waitForFunction(
      ([text, pos]) =>
        document.querySelector(".user")?.textContent === text &&
        document.querySelector(".bar .pos")?.textContent === pos &&
        document.querySelectorAll(".assistant").length === 1,
      [text, pos],
      { timeout: 30000 },
    );
  await shows("The second wording", "2/2");
  assert.match(await lastAnswer(page).textContent(), /You said: "The second wording"/);

  // ‹ shows the first version and its answer; › comes back.
  await page.click(".bar button[name=previous]");
  await shows("The first wording", "1/2");
  assert.match(await lastAnswer(page).textContent(), /You said: "The first wording"/);
  await page.click(".bar button[name=next]");
  await shows("The second wording", "2/2");

  // Regenerate: a second answer to the shown question.
  await page.locator(".bar button[name=regenerate]").last().click();
  await page.waitForFunction(() => [...document.querySelectorAll(".bar .pos")].map((p) => p.textContent).join() === "2/2,2/2", null, {
    timeout: 30000,
  });
  assert.match(await lastAnswer(page).textContent(), /You said: "The second wording"/);

  // Rate the shown answer; the rating comes back with the chat.
  await page.locator(".bar button[name=rate-up]").last().click();
  await page.waitForSelector(".bar button[name=rate-up][aria-pressed=true]");
  await page.reload();
  await page.waitForSelector(".bar button[name=rate-up][aria-pressed=true]", { timeout: 15000 });

  // Share: a link to a read-only copy, readable without an account.
  await page.click("#share");
  await page.waitForFunction(() => document.getElementById("share-link").textContent.includes("/share/"), null, {
    timeout: 15000,
  });
  const link = await page.textContent("#share-link");
  const token = link.split("/share/")[1];
  const shared = await fetch(`${API_URL}/api/shared?token=${encodeURIComponent(token)}`).then((r) => r.json());
  assert.deepEqual(
    shared.messages.map((m) => m.role),
    ["USER", "MODEL"],
  );
  assert.equal(shared.messages[0].content, "The second wording");
  assert.match(shared.messages[1].content, /You said: "The second wording"/);

  // Search: a word of the first version (off the active path) finds the
  // chat, the match in <mark>; a click opens it.
  await page.fill("#search [name=q]", "first");
  await page.press("#search [name=q]", "Enter");
  await page.waitForSelector("#results li .snippet mark", { timeout: 15000 });
  assert.equal(await page.textContent("#results li .snippet mark"), "first");
  assert.equal(await page.locator("#results li").count(), 1);
  await page.click("#results li");

  // Pin: a second chat, then the first one pinned comes first in the list.
  const pinnedId = await page.getAttribute("#chats li.active", "data-chat-id");
  await page.click("#new-chat");
  await page.fill("#send [name=content]", "Another chat");
  await page.click("#send button");
  await page.waitForFunction(() => document.querySelectorAll("#chats li").length === 2, null, { timeout: 30000 });
  await page.waitForFunction((id) => document.querySelector("#chats li")?.dataset.chatId !== id, pinnedId, { timeout: 15000 });
  await page.click(`#chats li[data-chat-id="${pinnedId}"] button.pin`);
  await page.waitForFunction(
    (id) => document.querySelector("#chats li")?.dataset.chatId === id && document.querySelector("#chats li").classList.contains("pinned"),
    pinnedId,
    { timeout: 15000 },
  );
  assert.equal(await page.textContent("#error"), "");
  await context.close();
});

test("a page on an origin the API does not allow is blocked by the browser", async () => {
  const page = await browser.newPage();
  const messages = [];
  page.on("console", (m) => messages.push(m.text()));
  await page.goto(`${REFUSED_PAGE_URL}/?api=${encodeURIComponent(API_URL)}`);
  await page.fill("[name=email]", user.email);
  await page.fill("[name=password]", user.password);
  await page.click("button[name=login]");
  await page.waitForFunction(() => document.getElementById("error").textContent.length > 0, null, { timeout: 15000 });
  // fetch() rejects: the SDK's call never sees the answer.
  assert.match(await page.textContent("#error"), /TypeError|Failed to fetch|network/i);
  assert.ok(messages.some((m) => /CORS|Access-Control-Allow-Origin/.test(m)), messages.join("\n"));
  assert.notEqual(await page.getAttribute("body", "data-ready"), "true");
  await page.close();
});

test("the live channel comes back when the server restarts under the page", async () => {
  // The server executable itself, stopped with SIGTERM and started again
  // on the same port, as an operator's restart does.
  const env = { ...process.env, WORKSPACE_LOG_LEVEL: "warn" };
  delete env.WORKSPACE_CONFIG;
  delete env.DATABASE_URL;
  const start = () => spawn(SERVER_BIN, ["--config", SERVER_CONFIG], { env, stdio: ["ignore", "ignore", "inherit"] });
  const ready = async () => {
    for (const started = Date.now(); Date.now() - started < 60000; ) {
      try {
        if ((await fetch(`${RESTART_API_URL}/readyz`)).ok) return;
      } catch {
        // Not listening yet.
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error("the server did not start");
  };
  let server = start();
  after(() => server.kill("SIGKILL"));
  await ready();

  const page = await browser.newPage();
  const restarted = { email: `web-restart-${Date.now()}@example.com`, password: user.password };
  await signedIn(page, PAGE_URL, true, RESTART_API_URL, restarted);
  await page.waitForSelector("body[data-live-connections='1']", { timeout: 15000 });
  await page.fill("[name=content]", "Before the restart");
  await page.click("#send button");
  await page.waitForSelector(".assistant[data-done=true]", { timeout: 30000 });
  await page.waitForFunction(() => document.querySelectorAll("#chats li").length === 1);

  server.kill("SIGTERM");
  const [code] = await once(server, "exit");
  assert.equal(code, 0, "the server stopped cleanly");
  // A moment with nothing listening: the page's next ticket request fails.
  await new Promise((r) => setTimeout(r, 500));
  server = start();
  await ready();

  // The page connected again by itself, and hears what happens now.
  await page.waitForSelector("body[data-live-connections='2']", { timeout: 30000 });
  const { token, chatId, orgId } = await page.evaluate(() => JSON.parse(sessionStorage.getItem("workspace")));
  const renamed = await fetch(`${RESTART_API_URL}/api/chat?org_id=${orgId}&chat_id=${chatId}`, {
    method: "PUT",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify({ title: "Renamed after the restart" }),
  });
  assert.equal(renamed.status, 200);
  await page.waitForFunction(() => document.querySelector("#chats li")?.textContent === "Renamed after the restart", null, {
    timeout: 15000,
  });
  assert.equal(await page.textContent("#error"), "");
  await page.close();
});
