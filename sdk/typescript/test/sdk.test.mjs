// The SDK against a real server, started by the Rust harness
// (tests/tests/integration/sdk.rs), which passes WORKSPACE_URL,
// WORKSPACE_TOKEN and WORKSPACE_ORG. Run: `node --experimental-websocket
// --test test/` after `tsc`.

import { test } from "node:test";
import assert from "node:assert/strict";
import { createWorkspace, WorkspaceError } from "../dist/index.js";

const baseUrl = process.env.WORKSPACE_URL;
const token = process.env.WORKSPACE_TOKEN;
const orgId = process.env.WORKSPACE_ORG;
if (!baseUrl || !token || !orgId) throw new Error("run through the harness: WORKSPACE_URL, WORKSPACE_TOKEN, WORKSPACE_ORG");

const ws = createWorkspace({ baseUrl, token });

async function collect(iterable) {
  const out = [];
  for await (const e of iterable) out.push(e);
  return out;
}

const textOf = (events) => events.filter((e) => e.type === "content").map((e) => e.content).join("");

/** A fetch whose first streamed response is cut after `bytes` bytes (a dropped connection). */
function droppingFetch(bytes) {
  let dropped = 0;
  const calls = [];
  const f = async (input, init) => {
    const response = await fetch(input, init);
    calls.push({ url: String(input instanceof Request ? input.url : input), lastEventId: new Headers(init?.headers).get("last-event-id") });
    const streamed = response.headers.get("content-type")?.startsWith("text/event-stream");
    if (!streamed || dropped > 0) return response;
    dropped++;
    const reader = response.body.getReader();
    let seen = 0;
    const body = new ReadableStream({
      async pull(controller) {
        if (seen >= bytes) {
          await reader.cancel();
          controller.error(new TypeError("terminated"));
          return;
        }
        const { value, done } = await reader.read();
        if (done) return controller.close();
        const piece = value.subarray(0, Math.max(0, bytes - seen));
        seen += value.byteLength;
        controller.enqueue(piece);
      },
    });
    return new Response(body, { status: response.status, headers: response.headers });
  };
  return { fetch: f, calls };
}

test("typed operations and typed errors", async () => {
  const { data, error } = await ws.api.GET("/api/users/me");
  assert.equal(error, undefined);
  assert.ok(data.id);
  // An error answer is the document's Error, with its stable code.
  const missing = await ws.api.GET("/api/chat", {
    params: { query: { org_id: orgId, chat_id: "00000000-0000-4000-8000-000000000000" } },
  });
  assert.equal(missing.response.status, 404);
  assert.equal(missing.error.error_code, "not_found");
  const anonymous = createWorkspace({ baseUrl });
  const refused = await anonymous.api.GET("/api/users/me");
  assert.equal(refused.response.status, 401);
  assert.equal(refused.error.error_code, "unauthenticated");
});

test("stream() yields typed events from start to end", async () => {
  const events = await collect(ws.stream("chat", { content: "Hello from the SDK" }, { orgId }));
  assert.equal(events[0].type, "start");
  assert.equal(events.at(-1).type, "end");
  assert.ok(textOf(events).length > 0);
  assert.ok(events.some((e) => e.type === "usage"));
});

// A 2x1 PNG (one red, one green pixel).
const PNG = Uint8Array.from(
  atob(
    "iVBORw0KGgoAAAANSUhEUgAAAAIAAAABCAIAAAB7QOjdAAAAD0lEQVR4nGP4z8DA8J8BAAf/Af8Bf4mnAAAAAElFTkSuQmCC",
  ),
  (c) => c.charCodeAt(0),
);

test("an image reaches the model, and its reasoning streams as typed events", async () => {
  const image = await ws.upload(new Blob([PNG], { type: "image/png" }), "dot.png", { orgId });
  const { data: models } = await ws.api.GET("/api/models/list", { params: { query: { org_id: orgId } } });
  const offline = models.find((m) => m.name === "offline-dev-model");
  assert.deepEqual(offline.input, ["text", "image", "pdf"]);
  assert.equal(offline.reasoning, "effort");
  const events = await collect(
    ws.stream(
      "chat",
      { content: "What is this?", upload_ids: [image.id], settings: { reasoning_effort: "low" } },
      { orgId },
    ),
  );
  const thinking = events.filter((e) => e.type === "reasoning").map((e) => e.content).join("");
  assert.match(thinking, /low effort/);
  assert.ok(events.findIndex((e) => e.type === "reasoning") < events.findIndex((e) => e.type === "content"));
  assert.match(textOf(events), /an image \(image\/(png|jpeg), 2x1\)/);
  const usage = events.find((e) => e.type === "usage");
  assert.ok(usage.reasoning_tokens > 0);
  const { data: chat } = await ws.api.GET("/api/chat", {
    params: { query: { org_id: orgId, chat_id: events[0].chat_id } },
  });
  assert.equal(chat.messages[1].reasoning, thinking);
});

test("edit, regenerate and switch branches: the chat's tree", async () => {
  const first = await collect(ws.stream("chat", { content: "A question to edit" }, { orgId }));
  const { chat_id: chatId, user_message_id: question } = first[0];
  const edited = await collect(
    ws.stream("chatEdit", { message_id: question, content: "The edited question" }, { orgId }),
  );
  assert.equal(edited[0].type, "start");
  assert.equal(edited.at(-1).type, "end");
  const again = await collect(ws.stream("chatRegenerate", { message_id: edited[0].message_id }, { orgId }));
  assert.equal(again[0].user_message_id, edited[0].user_message_id);
  const shown = await ws.api.GET("/api/chat", { params: { query: { org_id: orgId, chat_id: chatId } } });
  const [q, a] = shown.data.messages;
  assert.equal(q.content, "The edited question");
  assert.deepEqual([q.sibling_position, q.sibling_count, q.previous_sibling_id], [2, 2, question]);
  assert.deepEqual([a.id, a.sibling_position, a.sibling_count], [again[0].message_id, 2, 2]);
  const switched = await ws.api.POST("/api/chat/switch_branch", {
    params: { query: { org_id: orgId, chat_id: chatId } },
    body: { message_id: q.previous_sibling_id },
  });
  assert.equal(switched.data.messages[0].id, question);
  assert.equal(switched.data.messages[0].next_sibling_id, q.id);
});

test("stream() resumes a dropped connection: no event lost or doubled", async () => {
  const dropping = droppingFetch(600);
  const sdk = createWorkspace({ baseUrl, token, fetch: dropping.fetch });
  const events = await collect(sdk.stream("chat", { content: "Tell me a long story about resuming streams" }, { orgId }));
  assert.equal(events.at(-1).type, "end", JSON.stringify(events.at(-1)));
  // It reconnected to chat/stream with the last event it had.
  const resumed = dropping.calls.find((c) => c.url.includes("/api/chat/stream?"));
  assert.ok(resumed, JSON.stringify(dropping.calls));
  assert.ok(Number(resumed.lastEventId) >= 1);
  // Each event once: the stored answer is exactly the text yielded.
  const start = events[0];
  const { data: chat } = await ws.api.GET("/api/chat", { params: { query: { org_id: orgId, chat_id: start.chat_id } } });
  const answer = chat.messages.find((m) => m.id === start.message_id);
  assert.equal(textOf(events), answer.content);
  assert.equal(events.filter((e) => e.type === "start").length, 1);
});

test("stream() gives up with stream_lost when it cannot resume", async () => {
  // The first connection drops; every reconnection fails.
  const dropping = droppingFetch(300);
  const unreachable = async (input, init) => {
    if (String(input).includes("/api/chat/stream?")) throw new TypeError("fetch failed");
    return dropping.fetch(input, init);
  };
  const sdk = createWorkspace({ baseUrl, token, fetch: unreachable });
  await assert.rejects(
    collect(sdk.stream("chat", { content: "This connection keeps dropping" }, { orgId, maxReconnects: 2 })),
    (e) => e instanceof WorkspaceError && e.errorCode === "stream_lost",
  );
});

test("a refused stream is a typed error", async () => {
  await assert.rejects(
    collect(ws.stream("chat", { content: "" }, { orgId })),
    (e) => e instanceof WorkspaceError && e.status === 400 && e.errorCode === "invalid_message",
  );
});

test("stop() ends an answer", async () => {
  const events = [];
  for await (const e of ws.stream("chat", { content: "A long answer, please, that I will stop" }, { orgId })) {
    events.push(e);
    if (e.type === "start") await ws.stop("chat", e.message_id, orgId);
  }
  const last = events.at(-1);
  assert.equal(last.type, "end");
  assert.equal(last.finish_reason, "stopped");
});

test("conversation streams are typed and end", async () => {
  const { data: conversation } = await ws.api.POST("/api/conversation/create", {
    params: { query: { org_id: orgId } },
    body: { title: "SDK" },
  });
  const { data: models } = await ws.api.GET("/api/models/list", { params: { query: { org_id: orgId } } });
  const { data: session } = await ws.api.POST("/api/conversation/create_session", {
    params: { query: { org_id: orgId } },
    body: { conversation_id: conversation.id, model_id: models[0].id },
  });
  const events = await collect(ws.stream("conversation", { chat_session_id: session.id, message: "hi" }, { orgId }));
  assert.equal(events[0].type, "start");
  assert.equal(events.at(-1).type, "end");
});

test("live() delivers title updates", async () => {
  const controller = new AbortController();
  const seen = [];
  const listening = (async () => {
    for await (const e of ws.live({ orgId, signal: controller.signal })) {
      seen.push(e);
      if (e.type === "title" && e.title === "Renamed by the SDK") controller.abort();
    }
  })();
  // Wait for `ready`, then rename a chat.
  for (let i = 0; i < 100 && !seen.some((e) => e.type === "ready"); i++) await new Promise((r) => setTimeout(r, 50));
  assert.ok(seen.some((e) => e.type === "ready"), JSON.stringify(seen));
  const events = await collect(ws.stream("chat", { content: "Name me" }, { orgId }));
  const chatId = events[0].chat_id;
  const renamed = await ws.api.PUT("/api/chat", {
    params: { query: { org_id: orgId, chat_id: chatId } },
    body: { title: "Renamed by the SDK" },
  });
  assert.equal(renamed.response.status, 200, JSON.stringify(renamed.error));
  await listening;
  assert.ok(seen.some((e) => e.type === "title" && e.title === "Renamed by the SDK"), JSON.stringify(seen));
});

test("live() reconnects with a new ticket when the server goes away (1001)", async () => {
  // The first connection is told the server goes away after `ready`, as
  // at a restart; the SDK must take a new ticket and connect again.
  let connections = 0;
  class GoingAway {
    constructor(url) {
      this.inner = new WebSocket(url);
      this.first = ++connections === 1;
      this.inner.onmessage = (m) => {
        this.onmessage?.(m);
        if (this.first) {
          this.inner.onclose = null;
          this.inner.close();
          this.onclose?.({ code: 1001, reason: "the server is shutting down" });
        }
      };
      this.inner.onclose = (c) => this.onclose?.(c);
    }
    close(code) {
      this.inner.close(code);
    }
  }
  const sdk = createWorkspace({ baseUrl, token, WebSocket: GoingAway });
  const controller = new AbortController();
  let readies = 0;
  for await (const e of sdk.live({ orgId, signal: controller.signal })) {
    if (e.type === "ready" && ++readies === 2) controller.abort();
  }
  assert.equal(connections, 2);
  assert.equal(readies, 2);
});

test("live() keeps asking for a ticket while the server restarts", async () => {
  // As at a restart: the socket closes with 1001, then nothing listens
  // for a while (fetch rejects), then a proxy answers 502, then the new
  // server gives a ticket. The SDK must wait it out and connect again.
  let connections = 0;
  class GoingAway {
    constructor(url) {
      this.inner = new WebSocket(url);
      this.first = ++connections === 1;
      this.inner.onmessage = (m) => {
        this.onmessage?.(m);
        if (this.first) {
          this.inner.onclose = null;
          this.inner.close();
          this.onclose?.({ code: 1001, reason: "the server is shutting down" });
        }
      };
      this.inner.onclose = (c) => this.onclose?.(c);
    }
    close(code) {
      this.inner.close(code);
    }
  }
  const tickets = [];
  const restarting = async (input, init) => {
    const url = String(input instanceof Request ? input.url : input);
    if (url.includes("/api/chat/ws_ticket")) {
      tickets.push(Date.now());
      if (connections === 1 && tickets.length <= 4) throw new TypeError("fetch failed");
      if (connections === 1 && tickets.length === 5) {
        return new Response("<html>502 Bad Gateway</html>", { status: 502, headers: { "content-type": "text/html" } });
      }
    }
    return fetch(input, init);
  };
  const sdk = createWorkspace({ baseUrl, token, fetch: restarting, WebSocket: GoingAway });
  const controller = new AbortController();
  let readies = 0;
  for await (const e of sdk.live({ orgId, signal: controller.signal })) {
    if (e.type === "ready" && ++readies === 2) controller.abort();
  }
  assert.equal(readies, 2);
  assert.equal(connections, 2);
  // The first ticket, three failures and a 502, then the one that worked.
  assert.equal(tickets.length, 6);
  // With backoff: about 0.1 + 0.25 + 0.5 + 1 + 2 s (jittered by a quarter).
  assert.ok(tickets.at(-1) - tickets[1] >= 2500, `waited ${tickets.at(-1) - tickets[1]} ms`);
});

test("upload() reports progress and types the server's refusals", async () => {
  const progress = [];
  const text = "The password is swordfish.\n".repeat(8000);
  const uploaded = await ws.upload(new Blob([text], { type: "text/plain" }), "notes.txt", {
    orgId,
    onProgress: (sent, total) => progress.push([sent, total]),
  });
  assert.equal(uploaded.filename, "notes.txt");
  assert.ok(progress.length > 1, "several progress reports");
  const [sent, total] = progress.at(-1);
  assert.equal(sent, total);
  // An executable: 415.
  await assert.rejects(
    ws.upload(new Blob([new Uint8Array([0x4d, 0x5a, 0x90, 0, 3, 0, 0, 0])]), "tool.exe", { orgId }),
    (e) => e instanceof WorkspaceError && e.status === 415,
  );
  // Over the server's limit (the harness sets 1 MiB): 413.
  await assert.rejects(
    ws.upload(new Blob(["x".repeat(2 * 1024 * 1024)], { type: "text/plain" }), "big.txt", { orgId }),
    (e) => e instanceof WorkspaceError && e.status === 413,
  );
});

test("429 and 503 are retried after Retry-After", async () => {
  let attempts = 0;
  const busyOnce = async (input, init) => {
    attempts++;
    if (attempts === 1) {
      return new Response(JSON.stringify({ error_code: "server_busy", message: "busy", request_id: "r" }), {
        status: 503,
        headers: { "retry-after": "0", "content-type": "application/json" },
      });
    }
    return fetch(input, init);
  };
  const sdk = createWorkspace({ baseUrl, token, fetch: busyOnce });
  const { data } = await sdk.api.GET("/api/users/me");
  assert.equal(attempts, 2);
  assert.ok(data.id);
  // Without retries the refusal is the caller's, with its Retry-After.
  attempts = 0;
  const impatient = createWorkspace({ baseUrl, token, fetch: busyOnce, retries: 0 });
  const refused = await impatient.api.GET("/api/users/me");
  assert.equal(refused.response.status, 503);
  assert.equal(refused.error.error_code, "server_busy");
});

test("a refused access token is refreshed once, shared by concurrent requests", async () => {
  const email = process.env.WORKSPACE_EMAIL;
  const password = process.env.WORKSPACE_PASSWORD;
  assert.ok(email && password, "the harness passes WORKSPACE_EMAIL and WORKSPACE_PASSWORD");
  const login = await createWorkspace({ baseUrl }).api.POST("/api/auth/login", { body: { email, password } });
  assert.equal(login.response.status, 200);
  const calls = [];
  const counting = async (input, init) => {
    calls.push(String(input instanceof Request ? input.url : input));
    return fetch(input, init);
  };
  const seen = [];
  // A token the server refuses (`invalid_token`), with the session's refresh token.
  const sdk = createWorkspace({
    baseUrl,
    token: "not.a.jwt",
    refreshToken: login.data.refresh_token,
    fetch: counting,
    onTokens: (t) => seen.push(t),
  });
  const [a, b] = await Promise.all([sdk.api.GET("/api/users/me"), sdk.api.GET("/api/auth/sessions")]);
  assert.equal(a.response.status, 200);
  assert.equal(b.response.status, 200);
  assert.equal(calls.filter((u) => u.endsWith("/api/auth/refresh")).length, 1, calls.join("\n"));
  assert.equal(seen.length, 1);
  assert.equal(seen[0].session_id, login.data.session_id);
  assert.notEqual(seen[0].refresh_token, login.data.refresh_token);
  // The new token is used from now on, without another refresh.
  assert.ok(b.data.some((s) => s.current && s.id === login.data.session_id));
  await sdk.api.GET("/api/users/me");
  assert.equal(calls.filter((u) => u.endsWith("/api/auth/refresh")).length, 1);
  // The explicit refresh rotates again.
  const again = await sdk.refresh();
  assert.equal(seen.length, 2);
  assert.equal(again.refresh_token, seen[1].refresh_token);
  // Logged out: the refresh is refused, and so is the request.
  assert.equal((await sdk.api.POST("/api/auth/logout")).response.status, 200);
  const after = await sdk.api.GET("/api/users/me");
  assert.equal(after.response.status, 401);
  assert.equal(after.error.error_code, "session_revoked");
  await assert.rejects(sdk.refresh(), (e) => e instanceof WorkspaceError && e.errorCode === "session_revoked");
});

test("deleteOrganization() waits until the organization is gone", async () => {
  const { data: org, error } = await ws.api.POST("/api/org/create_org", { params: { query: { name: "SDK doomed" } } });
  assert.equal(error, undefined);
  // A wrong name is a typed refusal.
  await assert.rejects(ws.deleteOrganization(org.id, "sdk doomed"), (e) => {
    assert.ok(e instanceof WorkspaceError);
    assert.equal(e.status, 400);
    assert.equal(e.errorCode, "confirmation_mismatch");
    return true;
  });
  const seen = [];
  const done = await ws.deleteOrganization(org.id, "SDK doomed", {
    wait: true,
    pollMs: 100,
    onProgress: (s) => seen.push(s.state),
  });
  assert.equal(done.state, "done");
  assert.equal(done.organization_id, org.id);
  assert.ok(done.rows_deleted > 0);
  const { response } = await ws.api.GET("/api/org/features", { params: { query: { org_id: org.id } } });
  assert.equal(response.status, 403);
});
