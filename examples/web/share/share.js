// The page of a chat's share link, `/share/<token>`: served by
// workspace-server itself (the default `mail.public_url`). It reads the
// snapshot with `GET /api/shared?token=...` on the same origin (or on
// `?api=` when served elsewhere; the server's own copy may only reach its
// origin) and shows it as text: nothing of the chat is ever parsed as HTML.
const params = new URLSearchParams(location.search);
const api = params.get("api") ?? location.origin;
const token = decodeURIComponent(location.pathname.split("/").pop() ?? "");
const $ = (id) => document.getElementById(id);

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function show(chat) {
  document.title = `${chat.title} · Workspace`;
  $("title").textContent = chat.title;
  $("when").textContent = `Shared ${new Date(chat.created_at).toLocaleString()} · read-only`;
  const list = $("messages");
  for (const message of chat.messages) {
    const item = element("article", `message ${message.role === "USER" ? "USER" : "MODEL"}`);
    const who = message.role === "USER" ? "Question" : `Answer${message.model ? ` · ${message.model}` : ""}`;
    item.append(element("div", "who", who));
    item.append(document.createTextNode(message.content));
    if (message.status === "stopped" || message.status === "failed") {
      item.append(element("div", "ended", message.status === "stopped" ? "(stopped)" : "(interrupted)"));
    }
    list.append(item);
  }
  document.body.dataset.loaded = "true";
}

async function load() {
  try {
    const response = await fetch(`${api}/api/shared?token=${encodeURIComponent(token)}`, {
      referrerPolicy: "no-referrer",
      cache: "no-store",
    });
    const body = await response.json().catch(() => ({}));
    if (response.status === 404) {
      $("error").textContent = "This link does not work: it was revoked, or the chat was deleted.";
    } else if (!response.ok) {
      $("error").textContent = `${body.error_code ?? response.status}: ${body.message ?? ""}`;
    } else {
      show(body);
      return;
    }
  } catch (e) {
    $("error").textContent = String(e);
  }
  document.body.dataset.loaded = "error";
}

load();
