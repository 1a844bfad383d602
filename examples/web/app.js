// A small chat page built only on the SDK. The API's address comes from
// `?api=`; the session (token, organization, an answer in progress) lives
// in sessionStorage, so a reload resumes an answer where it was.
import { createWorkspace, WorkspaceError } from "/sdk/index.js";

const api = new URLSearchParams(location.search).get("api") ?? location.origin;
const $ = (id) => document.getElementById(id);
const state = JSON.parse(sessionStorage.getItem("workspace") ?? "{}");
const save = () => sessionStorage.setItem("workspace", JSON.stringify(state));
// The access token lasts minutes: the SDK renews it with the session's
// refresh token, and the page keeps the new pair.
const connect = () =>
  createWorkspace({
    baseUrl: api,
    token: () => state.token,
    refreshToken: state.refreshToken,
    onTokens: (t) => {
      state.token = t.access_token;
      state.refreshToken = t.refresh_token;
      save();
    },
  });
let ws = connect();
let kbId = state.kbId;

/** The data of an SDK answer, or its error as a `WorkspaceError`. */
function ok({ data, error, response }) {
  if (error) throw new WorkspaceError(response.status, error.error_code, error.message, error.request_id);
  return data;
}

function fail(e) {
  $("error").textContent = e instanceof WorkspaceError ? `${e.errorCode}: ${e.message}` : String(e);
}

function bubble(role, text) {
  const div = document.createElement("div");
  div.className = role;
  div.textContent = text;
  $("messages").append(div);
  return div;
}

async function signIn(signup) {
  const f = new FormData($("auth"));
  const body = { email: f.get("email"), password: f.get("password") };
  if (signup) {
    ok(await ws.api.POST("/api/auth/signup", {
      body: { ...body, first_name: f.get("first_name") || "Web", last_name: "User" },
    }));
  }
  const session = ok(await ws.api.POST("/api/auth/login", { body }));
  state.token = session.access_token;
  state.refreshToken = session.refresh_token;
  save();
  ws = connect();
  await start();
}

async function start() {
  const me = { data: ok(await ws.api.GET("/api/users/me")) };
  $("auth").hidden = true;
  const orgs = $("orgs");
  orgs.replaceChildren(...me.data.organizations.map((o) => new Option(o.name, o.id)));
  orgs.hidden = false;
  state.orgId ??= me.data.organizations[0].id;
  orgs.value = state.orgId;
  save();
  $("send").hidden = $("files").hidden = $("search").hidden = $("new-chat").hidden = false;
  document.body.dataset.ready = "true";
  // After a reload: the conversation so far, then the answer in progress.
  if (state.chatId) await openChat(state.chatId, state.pending?.messageId);
  else await listChats();
  listen();
  if (state.pending) await resumePending();
}

async function listChats() {
  const r = await ws.api.GET("/api/chat/list", { params: { query: { org_id: state.orgId } } });
  if (r.error) return fail(r.error.message);
  // Pinned chats come first (the server orders them).
  $("chats").replaceChildren(
    ...r.data.map((c) => {
      const li = document.createElement("li");
      li.dataset.chatId = c.id;
      li.className = [c.id === state.chatId && "active", c.pinned && "pinned"].filter(Boolean).join(" ");
      const title = document.createElement("span");
      title.textContent = c.title;
      li.onclick = () => openChat(c.id);
      const pin = button("📌", "pin", () => setPinned(c, !c.pinned));
      pin.addEventListener("click", (e) => e.stopPropagation());
      pin.className = "pin";
      pin.title = c.pinned ? "Unpin" : "Pin";
      pin.setAttribute("aria-pressed", String(c.pinned));
      li.append(title, pin);
      return li;
    }),
  );
}

async function setPinned(chat, pinned) {
  const r = await ws.api.PUT("/api/chat", {
    params: { query: { org_id: state.orgId, chat_id: chat.id } },
    body: { pinned },
  });
  if (r.error) return fail(r.error.message);
  await listChats();
}

/** Search across one's chats: one result per chat, its snippet with the
 * matches in <mark> (the server escapes everything else, so the snippet is
 * safe to insert as HTML). */
async function search(q) {
  if (!q.trim()) return $("results").replaceChildren();
  const r = await ws.api.GET("/api/chat/search", { params: { query: { org_id: state.orgId, q } } });
  if (r.error) return fail(r.error.message);
  $("results").replaceChildren(
    ...r.data.results.map((hit) => {
      const li = document.createElement("li");
      li.dataset.chatId = hit.chat_id;
      const title = document.createElement("b");
      title.innerHTML = hit.title_highlight;
      const snippet = document.createElement("div");
      snippet.className = "snippet";
      snippet.innerHTML = hit.snippet;
      li.append(title, snippet);
      li.onclick = () => openChat(hit.chat_id);
      return li;
    }),
  );
}

async function openChat(id, inProgress) {
  state.chatId = id;
  save();
  const r = await ws.api.GET("/api/chat", { params: { query: { org_id: state.orgId, chat_id: id } } });
  if (r.error) return fail(r.error.message);
  showPath(r.data.messages, inProgress);
  await listChats();
}

/** The chat's active path, each message with its controls. */
function showPath(messages, inProgress) {
  $("messages").replaceChildren();
  $("share").hidden = false;
  $("share-link").textContent = "";
  for (const m of messages) {
    if (m.id !== inProgress) controls(m, bubble(m.role === "USER" ? "user" : "assistant", m.content));
  }
  document.body.dataset.path = messages.map((m) => m.id).join(",");
}

function button(label, name, onclick) {
  const b = document.createElement("button");
  b.textContent = label;
  b.name = name;
  b.type = "button";
  if (onclick) b.onclick = () => onclick().catch(fail);
  else b.disabled = true;
  return b;
}

/**
 * A message's bar, after its bubble: "‹ 2/3 ›" between its versions (a
 * switch shows the other one and what was below it), and edit (a
 * question) or regenerate (an answer): each makes a new version.
 */
function controls(m, div) {
  div.dataset.messageId = m.id;
  const bar = document.createElement("div");
  bar.className = "bar";
  bar.dataset.for = m.id;
  if (m.sibling_count > 1) {
    const pos = document.createElement("span");
    pos.className = "pos";
    pos.textContent = `${m.sibling_position}/${m.sibling_count}`;
    const to = (id) => id && (() => switchTo(id));
    bar.append(button("‹", "previous", to(m.previous_sibling_id)), pos, button("›", "next", to(m.next_sibling_id)));
  }
  if (m.role === "USER") bar.append(button("edit", "edit", async () => editForm(m, div)));
  else {
    bar.append(button("regenerate", "regenerate", () => regenerate(m, div)));
    // 👍/👎: the caller's own rating, given again to change it, the same
    // one again to remove it.
    for (const rating of ["up", "down"]) {
      const b = button(rating === "up" ? "👍" : "👎", `rate-${rating}`, () => rate(m, rating, bar));
      b.setAttribute("aria-pressed", String(m.feedback?.rating === rating));
      bar.append(b);
    }
  }
  div.after(bar);
}

async function rate(m, rating, bar) {
  const pressed = bar.querySelector(`button[name=rate-${rating}]`).getAttribute("aria-pressed") === "true";
  const query = { org_id: state.orgId };
  if (pressed) {
    ok(await ws.api.DELETE("/api/chat/feedback", { params: { query: { ...query, message_id: m.id } } }));
  } else {
    ok(await ws.api.POST("/api/chat/feedback", { params: { query }, body: { message_id: m.id, rating } }));
  }
  for (const r of ["up", "down"]) {
    bar.querySelector(`button[name=rate-${r}]`).setAttribute("aria-pressed", String(!pressed && r === rating));
  }
}

/** A read-only link to the chat as it is now (shown once: the server keeps only its hash). */
async function share() {
  const link = ok(
    await ws.api.POST("/api/chat/share", { params: { query: { org_id: state.orgId, chat_id: state.chatId } } }),
  );
  const a = $("share-link");
  a.href = link.url;
  a.textContent = link.url;
}

async function switchTo(messageId) {
  const detail = ok(
    await ws.api.POST("/api/chat/switch_branch", {
      params: { query: { org_id: state.orgId, chat_id: state.chatId } },
      body: { message_id: messageId },
    }),
  );
  showPath(detail.messages);
}

/** Drops what the page shows from `div` on (a new version replaces it). */
function cutFrom(div) {
  while (div.nextSibling) div.nextSibling.remove();
  div.remove();
}

function editForm(m, div) {
  const form = document.createElement("form");
  form.className = "edit";
  const input = document.createElement("input");
  input.type = "text";
  input.name = "content";
  input.value = m.content;
  form.append(input, button("save", "save"));
  form.lastChild.type = "submit";
  form.lastChild.disabled = false;
  form.onsubmit = (e) => {
    e.preventDefault();
    const content = input.value;
    cutFrom(div);
    bubble("user", content);
    const out = bubble("assistant", "");
    answerAgain(ws.stream("chatEdit", { message_id: m.id, content }, { orgId: state.orgId, onEventId }), out).catch(fail);
  };
  div.nextSibling.after(form);
}

async function regenerate(m, div) {
  cutFrom(div);
  const out = bubble("assistant", "");
  await answerAgain(ws.stream("chatRegenerate", { message_id: m.id }, { orgId: state.orgId, onEventId }), out);
}

/** An edit's or a regeneration's answer, then the path with its new counts. */
async function answerAgain(events, out) {
  await show(events, out);
  await openChat(state.chatId);
}

/** Titles (generated, or renamed elsewhere) arrive over the live channel. */
async function listen() {
  try {
    for await (const event of ws.live({ orgId: state.orgId })) {
      if (event.type === "ready") {
        document.body.dataset.live = "true";
        // Each connection's `ready` (a restart's reconnection adds one).
        document.body.dataset.liveConnections = String(Number(document.body.dataset.liveConnections ?? 0) + 1);
      }
      if (event.type === "title") {
        const li = document.querySelector(`li[data-chat-id="${event.chat_id}"]`);
        if (li) li.textContent = event.title;
        else await listChats();
      }
    }
  } catch (e) {
    fail(e);
  }
}

/** Shows an answer's events; `pending` keeps what a reload needs to resume it. */
async function show(events, out) {
  for await (const event of events) {
    if (event.type === "start") {
      state.chatId = event.chat_id;
      state.pending = { messageId: event.message_id, lastEventId: 0, text: "" };
    }
    if (event.type === "content") {
      out.textContent += event.content;
      state.pending.text = out.textContent;
    }
    if (event.type === "sources") out.dataset.sources = String(event.sources.length);
    if (event.type === "error") fail(`${event.error_code}: ${event.message}`);
    save();
  }
  delete state.pending;
  save();
  out.dataset.done = "true";
  await listChats();
}

const onEventId = (id) => {
  if (state.pending) {
    state.pending.lastEventId = id;
    save();
  }
};

async function send(content, useKb) {
  const question = bubble("user", content);
  const out = bubble("assistant", "");
  const body = { content };
  if (state.chatId) body.chat_id = state.chatId;
  if (useKb && kbId) body.knowledge_base_ids = [kbId];
  let start;
  await show(tap(ws.stream("chat", body, { orgId: state.orgId, onEventId }), (e) => (start ??= e)), out);
  // The bars of a new exchange: one version each, so far.
  if (start?.type === "start") {
    const one = { sibling_position: 1, sibling_count: 1 };
    controls({ ...one, id: start.user_message_id, role: "USER", content }, question);
    controls({ ...one, id: start.message_id, role: "MODEL" }, out);
  }
}

/** `events`, each also seen by `f`. */
async function* tap(events, f) {
  for await (const e of events) {
    f(e);
    yield e;
  }
}

async function resumePending() {
  const { messageId, lastEventId, text } = state.pending;
  const out = bubble("assistant", text);
  out.dataset.resumed = "true";
  await show(ws.resume("chat", messageId, lastEventId, { orgId: state.orgId, onEventId }), out);
}

async function addFile(file) {
  const progress = $("files").querySelector("progress");
  const uploaded = await ws.upload(file, file.name, {
    orgId: state.orgId,
    onProgress: (sent, total) => (progress.value = sent / total),
  });
  const created = ok(await ws.api.POST("/api/kb/create", {
    params: { query: { org_id: state.orgId } },
    body: {
      name: `Files ${new Date().toISOString()}`,
      description: "",
      embedding_model: "all-minilm-l6-v2",
      sources: [{ type: "file", config: { file_ids: [uploaded.id] } }],
    },
  }));
  kbId = state.kbId = created.id;
  save();
  for (;;) {
    const { data } = await ws.api.GET("/api/kb/ingestion_status", { params: { query: { kb_id: kbId } } });
    $("kb-status").textContent = data.status;
    if (data.status !== "processing") break;
    await new Promise((r) => setTimeout(r, 300));
  }
}

$("auth").addEventListener("submit", (e) => {
  e.preventDefault();
  signIn(e.submitter?.name === "signup").catch(fail);
});
$("send").addEventListener("submit", (e) => {
  e.preventDefault();
  const f = new FormData($("send"));
  $("send").reset();
  send(f.get("content"), f.get("kb") === "on").catch(fail);
});
$("share").addEventListener("click", () => share().catch(fail));
$("new-chat").addEventListener("click", () => {
  delete state.chatId;
  save();
  $("messages").replaceChildren();
  $("share-link").textContent = "";
  $("share").hidden = true;
  listChats().catch(fail);
});
$("search").addEventListener("submit", (e) => {
  e.preventDefault();
  search(new FormData($("search")).get("q")).catch(fail);
});
$("files").addEventListener("submit", (e) => {
  e.preventDefault();
  const file = $("files").querySelector("input[type=file]").files[0];
  if (file) addFile(file).catch(fail);
});
$("orgs").addEventListener("change", () => {
  state.orgId = $("orgs").value;
  delete state.chatId;
  save();
  listChats();
});
if (state.token) start().catch(fail);

