// The page of a password-reset e-mail's link, `/reset-password?token=...`:
// served by workspace-server itself (the default `mail.public_url`). It
// sends the token with the new password to `POST /api/auth/reset_password`
// on the same origin (or on `?api=` when served elsewhere; the server's own
// copy may only reach its origin).
const params = new URLSearchParams(location.search);
const token = params.get("token") ?? "";
const api = params.get("api") ?? location.origin;
const $ = (id) => document.getElementById(id);

if (!token) {
  $("error").textContent = "This link has no reset token: open the link of the e-mail.";
  $("reset").hidden = true;
}

$("reset").addEventListener("submit", async (event) => {
  event.preventDefault();
  const form = new FormData(event.target);
  $("error").textContent = "";
  if (form.get("new_password") !== form.get("again")) {
    $("error").textContent = "The two passwords differ.";
    return;
  }
  try {
    const response = await fetch(`${api}/api/auth/reset_password`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ token, new_password: form.get("new_password") }),
    });
    const body = await response.json().catch(() => ({}));
    if (!response.ok) {
      $("error").textContent = `${body.error_code ?? response.status}: ${body.message ?? ""}`;
      return;
    }
    $("reset").hidden = true;
    $("done").textContent = "Your password is set. Log in with it (every session was logged out).";
    document.body.dataset.reset = "true";
  } catch (e) {
    $("error").textContent = String(e);
  }
});
