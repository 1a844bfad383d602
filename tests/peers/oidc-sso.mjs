// A strict, OpenID-certified provider (panva's oidc-provider) for the
// single sign-on tests (tests/src/sso_peer.rs, `OidcSso`).
//
//   OIDC_PORT=N REDIRECT_URI=... node oidc-sso.mjs
//
// Issuer http://127.0.0.1:N (or ISSUER, to answer for another issuer than
// the address it is reached at). One confidential client, `workspace`
// with the secret `sso-secret` (client_secret_basic), redirect URI
// REDIRECT_URI, PKCE required; RFC 9207 `iss` in authorization responses.
// Its signing key is made at start: every start is a key rotation (a new
// `kid`). Its own development login and consent pages (any password).
// People and their claims (`email`, `email_verified`, `given_name`,
// `family_name`, `groups`: in UserInfo, as the certified profile keeps the
// ID token small) are set by the test: `POST /peer/accounts` with
// `{"<login>": {claims}}`; an unknown login gets none (no e-mail).

import http from 'node:http';
import crypto from 'node:crypto';
import Provider from 'oidc-provider';

const port = Number(process.env.OIDC_PORT);
const issuer = process.env.ISSUER || `http://127.0.0.1:${port}`;
const accounts = {};

const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
const jwk = { ...privateKey.export({ format: 'jwk' }), kid: crypto.randomUUID(), use: 'sig', alg: 'RS256' };

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: 'workspace',
      client_secret: 'sso-secret',
      redirect_uris: [process.env.REDIRECT_URI],
      grant_types: ['authorization_code'],
      response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_basic',
    },
  ],
  jwks: { keys: [jwk] },
  features: { devInteractions: { enabled: true } },
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['given_name', 'family_name', 'name', 'groups'],
  },
  pkce: { required: () => true },
  findAccount: async (_ctx, id) => ({
    accountId: id,
    claims: async () => ({ sub: id, ...(accounts[id] || {}) }),
  }),
  ttl: { Grant: 3600, Session: 3600, Interaction: 600, AccessToken: 600, IdToken: 600 },
});
provider.proxy = false;
const callback = provider.callback();

const server = http.createServer(async (req, res) => {
  if (req.url === '/peer/accounts' && req.method === 'POST') {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    Object.assign(accounts, JSON.parse(Buffer.concat(chunks).toString() || '{}'));
    res.writeHead(204);
    res.end();
    return;
  }
  if (req.url === '/peer/kid') {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ kid: jwk.kid }));
    return;
  }
  callback(req, res);
});
server.listen(port, '127.0.0.1');
