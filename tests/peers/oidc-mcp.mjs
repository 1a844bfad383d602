// A strict, OpenID-certified authorization server (panva's oidc-provider)
// in front of an MCP server (the official TypeScript SDK), for the
// integration tests (tests/src/mcp_peers.rs, `OidcMcp`).
//
//   OIDC_PORT=N MCP_PORT=M node oidc-mcp.mjs
//
// The authorization server, issuer http://127.0.0.1:N, has dynamic client
// registration, PKCE required for public clients, resource indicators
// (RFC 8707) whose access tokens for the MCP server are JWTs with the MCP
// URL as audience, RFC 9207 issuer identification, refresh tokens and
// revocation; its own development login and consent pages (any login,
// any password). The MCP server, http://127.0.0.1:M/mcp, answers `401`
// with RFC 9728 metadata to requests without a valid token, verifies every
// token's signature, issuer, audience and expiry, and has two tools:
// `whoami` (the token's subject) and `add`.
//
// `GET http://127.0.0.1:M/peer/events` lists what happened, for the tests'
// assertions: tokens issued, refreshed and revoked, and MCP calls with the
// subject they ran as.

import http from 'node:http';
import Provider from 'oidc-provider';
import { createRemoteJWKSet, jwtVerify } from 'jose';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import {
  CallToolRequestSchema,
  ListToolsRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';

const oidcPort = Number(process.env.OIDC_PORT);
const mcpPort = Number(process.env.MCP_PORT);
const issuer = `http://127.0.0.1:${oidcPort}`;
const mcpBase = `http://127.0.0.1:${mcpPort}`;
const mcpUrl = `${mcpBase}/mcp`;
const scope = 'mcp:tools';
const events = [];

const provider = new Provider(issuer, {
  features: {
    devInteractions: { enabled: true },
    registration: { enabled: true },
    revocation: { enabled: true },
    resourceIndicators: {
      enabled: true,
      getResourceServerInfo: async (_ctx, resource) => {
        if (resource !== mcpUrl) {
          throw new Provider.errors.InvalidTarget();
        }
        return {
          scope,
          audience: mcpUrl,
          accessTokenTTL: 30,
          accessTokenFormat: 'jwt',
          jwt: { sign: { alg: 'RS256' } },
        };
      },
    },
  },
  scopes: [scope],
  // Refresh tokens for every client registered for the grant (MCP clients
  // do not ask for offline_access).
  issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed('refresh_token'),
  pkce: { required: () => true },
  ttl: { RefreshToken: 3600, Grant: 3600, Session: 3600, Interaction: 600 },
});
provider.proxy = false;
provider.on('grant.success', (ctx) => {
  const grant = ctx.oidc.params?.grant_type;
  events.push({ kind: grant === 'refresh_token' ? 'refreshed' : 'issued' });
});
provider.on('grant.error', (ctx, error) => {
  events.push({ kind: 'grant_error', error: error.error, description: error.error_description });
});
// Revoking a refresh token revokes its whole grant (RFC 7009 section 2.1).
provider.on('grant.revoked', () => events.push({ kind: 'revoked' }));
provider.on('revocation.error', (_ctx, error) => events.push({ kind: 'revocation_error', error: error.error }));
provider.on('registration_create.success', () => events.push({ kind: 'registered' }));

const jwks = createRemoteJWKSet(new URL(`${issuer}/jwks`));

function mcpServer(subject) {
  const server = new Server(
    { name: 'oidc-protected', version: '1.0.0' },
    { capabilities: { tools: {} } },
  );
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [
      {
        name: 'whoami',
        description: 'The subject of the access token the call carries.',
        inputSchema: { type: 'object', properties: {} },
      },
      {
        name: 'add',
        description: 'Adds two numbers.',
        inputSchema: {
          type: 'object',
          properties: { a: { type: 'number' }, b: { type: 'number' } },
          required: ['a', 'b'],
        },
      },
    ],
  }));
  server.setRequestHandler(CallToolRequestSchema, async (request) => {
    const { name, arguments: args } = request.params;
    events.push({ kind: 'call', tool: name, subject });
    if (name === 'whoami') {
      return { content: [{ type: 'text', text: `subject:${subject}` }] };
    }
    if (name === 'add') {
      return { content: [{ type: 'text', text: String(Number(args.a) + Number(args.b)) }] };
    }
    return { content: [{ type: 'text', text: `unknown tool ${name}` }], isError: true };
  });
  return server;
}

function unauthorized(res, error) {
  events.push({ kind: 'mcp_refused', error });
  res.writeHead(401, {
    'content-type': 'application/json',
    'www-authenticate': `Bearer error="invalid_token", error_description="${error}", resource_metadata="${mcpBase}/.well-known/oauth-protected-resource/mcp", scope="${scope}"`,
  });
  res.end(JSON.stringify({ error: 'invalid_token', error_description: error }));
}

async function readBody(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  const text = Buffer.concat(chunks).toString('utf8');
  return text ? JSON.parse(text) : undefined;
}

const mcp = http.createServer(async (req, res) => {
  try {
    const path = new URL(req.url, mcpBase).pathname;
    if (path === '/peer/events') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(events));
      return;
    }
    if (path === '/.well-known/oauth-protected-resource/mcp'
        || path === '/.well-known/oauth-protected-resource') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({
        resource: mcpUrl,
        authorization_servers: [issuer],
        scopes_supported: [scope],
        bearer_methods_supported: ['header'],
      }));
      return;
    }
    if (path !== '/mcp') {
      res.writeHead(404).end();
      return;
    }
    const header = req.headers.authorization ?? '';
    if (!header.startsWith('Bearer ')) {
      unauthorized(res, 'no access token');
      return;
    }
    let subject;
    try {
      const { payload } = await jwtVerify(header.slice(7), jwks, {
        issuer,
        audience: mcpUrl,
        typ: 'at+jwt',
      });
      if (!String(payload.scope ?? '').split(' ').includes(scope)) {
        unauthorized(res, 'the token lacks the mcp:tools scope');
        return;
      }
      subject = payload.sub;
    } catch (e) {
      unauthorized(res, `the token is not valid here: ${e.code ?? e.message}`);
      return;
    }
    // Stateless: a server and a transport per request.
    const server = mcpServer(subject);
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on('close', () => {
      transport.close();
      server.close();
    });
    await server.connect(transport);
    const body = req.method === 'POST' ? await readBody(req) : undefined;
    await transport.handleRequest(req, res, body);
  } catch (e) {
    if (!res.headersSent) {
      res.writeHead(500, { 'content-type': 'text/plain' });
    }
    res.end(String(e));
  }
});

provider.listen(oidcPort, '127.0.0.1');
mcp.listen(mcpPort, '127.0.0.1');
