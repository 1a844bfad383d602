// The invitation page of the e-mail's link, `/invite/accept?token=...`:
// served by workspace-server itself (the default `mail.public_url`) and by
// `serve.mjs`. It first asks `GET /api/invitations/validate` what the
// invitation is: for an address that already has an account it asks only
// for that account's password (accepting joins the account to the
// organization; the names the request carries are ignored), else for a
// name and a new password. It then sends the token to
// `POST /api/auth/signup_invite` on the same origin (or on `?api=` when
// served by serve.mjs; the server's own copy may only reach its origin).
const params = new URLSearchParams(location.search);
const token = params.get("token") ?? "";
const api = params.get("api") ?? location.origin;
const $ = (id) => document.getElementById(id);
let existing = false;
let organization = "";

function showExistingAccount(email) {
  existing = true;
  $("intro").textContent =
    `${email} already has an account: enter its password to join ${organization}.`;
  for (const name of ["first_name", "last_name"]) {
    const input = document.querySelector(`input[name=${name}]`);
    input.required = false;
    input.closest("label").hidden = true;
  }
  const password = document.querySelector("input[name=password]");
  password.autocomplete = "current-password";
  $("submit").textContent = `Join ${organization}`;
  document.body.dataset.existingAccount = "true";
}

async function look() {
  if (!token) {
    $("error").textContent = "This link has no invitation token: open the link of the e-mail.";
    $("accept").hidden = true;
    return;
  }
  try {
    const response = await fetch(`${api}/api/invitations/validate?token=${encodeURIComponent(token)}`);
    const body = await response.json();
    if (!body.valid) {
      $("error").textContent =
        "This invitation can no longer be accepted (used, revoked or expired): ask for a new one.";
      $("accept").hidden = true;
      return;
    }
    organization = body.invitation.organization.name;
    $("title").textContent = `Join ${organization}`;
    if (body.existing_account) {
      showExistingAccount(body.invitation.email);
    }
  } catch (e) {
    // The form still works: the server checks everything again.
  }
  document.body.dataset.ready = "true";
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
        // Ignored for an existing account, but the body requires names.
        first_name: existing ? "-" : form.get("first_name"),
        last_name: existing ? "-" : form.get("last_name"),
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
    $("done").textContent = existing
      ? `You have joined ${organization} as ${body.email}. Log in as usual.`
      : `Welcome, ${body.first_name}: your account ${body.email} is ready and you have joined ` +
        `${organization}. Log in with workspace auth login --email ${body.email}.`;
    document.body.dataset.accepted = "true";
  } catch (e) {
    $("error").textContent = String(e);
  }
});

look();
