// A real OpenID provider for the fsnotes OAuth tests: panva's oidc-provider (certified by the
// OpenID Foundation), configured as a small authorization server on loopback, not a stand-in.
//
//   node oidc_provider.mjs --jwks FILE [--port N] --resource URL=SCOPES ... --client ID:SECRET ...
//
// --jwks      a JWKS file of PRIVATE signing keys, each with a kid; the first signs (the test
//             writes it, so it holds the provider's keys and can sign crafted tokens with them).
//             Rotation is a restart with another file on the same --port.
// --port      the loopback port (0, the default: a free one).
// --resource  a resource server (RFC 8707 resource indicator) and the scopes it accepts; its
//             access tokens are JWTs (RFC 9068) with aud = URL. Repeatable.
// --client    a static confidential client for client_credentials (client_secret_basic or
//             _post); oidc-provider makes a client_credentials token's `sub` its client_id.
//             Repeatable.
//
// Also on: dynamic client registration (RFC 7591) and the development login/consent pages
// (any login name is accepted as the account id), for the authorization code + PKCE flow.
// Prints "oidc provider at ISSUER" on stdout once listening, logs "METHOD PATH STATUS" for
// every request on stderr (the tests count JWKS fetches from it), and stops on SIGTERM.

import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { parseArgs } from 'node:util';

import Provider, { errors } from 'oidc-provider';

// Access tokens live as long as a test needs (oidc-provider's own default is 10 minutes for
// client_credentials and 1 hour otherwise; the shorter one for both).
const ACCESS_TOKEN_TTL_S = 600;

const { values } = parseArgs({
  options: {
    jwks: { type: 'string' },
    port: { type: 'string', default: '0' },
    resource: { type: 'string', multiple: true, default: [] },
    client: { type: 'string', multiple: true, default: [] },
  },
});
if (!values.jwks) {
  console.error('usage: oidc_provider.mjs --jwks FILE [--port N] --resource URL=SCOPES --client ID:SECRET');
  process.exit(2);
}

const jwks = JSON.parse(readFileSync(values.jwks, 'utf8'));
const resources = new Map(values.resource.map((spec) => {
  const at = spec.indexOf('=');
  return [spec.slice(0, at), spec.slice(at + 1)];
}));
const clients = values.client.map((spec) => {
  const at = spec.indexOf(':');
  return {
    client_id: spec.slice(0, at),
    client_secret: spec.slice(at + 1),
    grant_types: ['client_credentials'],
    redirect_uris: [],
    response_types: [],
    token_endpoint_auth_method: 'client_secret_basic',
  };
});

function resourceServer(indicator) {
  const scope = resources.get(indicator);
  if (scope === undefined) throw new errors.InvalidTarget();
  return { scope, audience: indicator, accessTokenFormat: 'jwt', accessTokenTTL: ACCESS_TOKEN_TTL_S };
}

async function start(port) {
  // The issuer is fixed before listening, so a free port is found first by listening on it.
  const server = createServer();
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', resolve);
  });
  const issuer = `http://127.0.0.1:${server.address().port}`;
  const provider = new Provider(issuer, {
    jwks,
    clients,
    // Cookie signing keys for the login pages (a test provider; nothing outlives the process).
    cookies: { keys: [randomBytes(32).toString('base64url')] },
    // The resources' scopes are the provider's too: dynamic registration accepts a client's
    // `scope` only from these, and a host registers with the scopes the resource asks for.
    scopes: ['openid', 'offline_access', ...new Set([...resources.values()].flatMap((s) => s.split(' ')))],
    features: {
      clientCredentials: { enabled: true },
      registration: { enabled: true },
      devInteractions: { enabled: true },
      resourceIndicators: {
        enabled: true,
        // A client naming no resource gets none (an opaque token for userinfo only).
        defaultResource: (_ctx, _client, oneOf) => oneOf,
        // An authorization code's token is for the resource the client asked for.
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx, indicator) => resourceServer(indicator),
      },
    },
    ttl: {
      AccessToken: ACCESS_TOKEN_TTL_S,
      ClientCredentials: ACCESS_TOKEN_TTL_S,
    },
    // The dev login pages only: a login name is the account, with no claims beyond sub.
    findAccount: (_ctx, sub) => ({ accountId: sub, claims: () => ({ sub }) }),
  });
  provider.use(async (ctx, next) => {
    await next();
    console.error(`${ctx.method} ${ctx.path} ${ctx.status}`);
  });
  server.on('request', provider.callback());
  process.on('SIGTERM', () => {
    server.closeAllConnections();
    server.close(() => process.exit(0));
  });
  console.log(`oidc provider at ${issuer}`);
}

await start(Number(values.port));
