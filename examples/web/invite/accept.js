// The invitation page of the e-mail's link, `/invite/accept?token=...`:
// served by workspace-server itself (the default `mail.public_url`) and by
// `serve.mjs`. It sends the token with the chosen names and password to
// `POST /api/auth/signup_invite` on the same origin (or on `?api=` when
// served by serve.mjs; the server's own copy may only reach its origin).
const params = new URLSearchParams(location.search);
const token = params.get("token") ?? "";
const api = params.get("api") ?? location.origin;
const $ = (id) => document.getElementById(id);

if (!token) {
  $("error").textContent = "This link has no invitation token: open the link of the e-mail.";
  $("accept").hidden = true;
}

$("accept").addEventListener("submit", async (event) => {
  event.preventDefault();
  const form = new FormData(event.target);
  $("error").textContent = "";
  try {
    const response = await fetch(`${api}/api/auth/signup_invite`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        first_name: form.get("first_name"),
        last_name: form.get("last_name"),
        password: form.get("password"),
        invite_token: token,
      }),
    });
    const body = await response.json().catch(() => ({}));
    if (!response.ok) {
      $("error").textContent = `${body.error_code ?? response.status}: ${body.message ?? ""}`;
      return;
    }
    $("accept").hidden = true;
    $("done").textContent =
      `Welcome, ${body.first_name}: you have joined as ${body.email}. ` +
      `Log in with workspace auth login --email ${body.email}.`;
    document.body.dataset.accepted = "true";
  } catch (e) {
    $("error").textContent = String(e);
  }
});
