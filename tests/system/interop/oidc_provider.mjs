// A real OpenID provider for the approval tests: npm `oidc-provider` (OpenID Certified), started by
// tests/support/oidc.py. It issues JWT access tokens for the gateway's resource (the agent's bearer token) and
// signs in approvers with the authorization-code flow + PKCE (the gateway's approval page is a public client).
// Any login name is accepted (dev interactions): the name becomes the account's `sub`, with a verified email
// `sub@example.test` and a `name` the person chose (OPTIONS.claims, `{sub: {claim: value}}`, overrides any of them
// or adds `groups`, which the profile scope carries).
// ID tokens carry those claims (as Google's and many providers' do), not only the userinfo endpoint, and access
// tokens the email.
// Access tokens are JWTs for the resource the agent asks for, or opaque for one of OPTIONS.opaque: those a resource
// server checks at the RFC 7662 introspection endpoint as client `gateway-introspection` (secret
// `introspection-secret`, HTTP Basic).
//   node oidc_provider.mjs PORT RESOURCE_URL APPROVALS_REDIRECT_URI[,URI...] [OPTIONS_JSON]
import Provider from 'oidc-provider';
import { generateKeyPairSync } from 'node:crypto';

const [port, resource, approvalsRedirect, optionsJson] = process.argv.slice(2);
const options = JSON.parse(optionsJson || '{}');
const overrides = options.claims || {};
const opaque = new Set(options.opaque || []);
const accountClaims = (sub) => ({
  sub,
  email: `${sub}@example.test`,
  email_verified: true,
  name: sub.charAt(0).toUpperCase() + sub.slice(1),
  ...(overrides[sub] || {}),
});
const issuer = `http://127.0.0.1:${port}`;
const key = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ format: 'jwk' });
const scopes = 'tenants:read tenants:reset';

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: 'gateway-approvals',
      token_endpoint_auth_method: 'none',
      redirect_uris: approvalsRedirect.split(','),
      grant_types: ['authorization_code'],
      response_types: ['code'],
    },
    {
      client_id: 'gateway-introspection',
      client_secret: 'introspection-secret',
      token_endpoint_auth_method: 'client_secret_basic',
      redirect_uris: [],
      grant_types: [],
      response_types: [],
    },
    {
      client_id: 'agent-app',
      token_endpoint_auth_method: 'none',
      redirect_uris: ['http://127.0.0.1/agent-callback'],
      grant_types: ['authorization_code'],
      response_types: ['code'],
    },
  ],
  jwks: { keys: [{ ...key, kid: 'k1', alg: 'RS256', use: 'sig' }] },
  cookies: { keys: ['test-cookie-key'] },
  pkce: { required: () => true },
  scopes: ['openid', 'email', 'profile', ...scopes.split(' ')],
  claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name', 'groups'] },
  conformIdTokenClaims: false,
  // Access tokens name the person as many providers' do: their email, and whether it is verified.
  extraTokenClaims: async (ctx, token) => {
    if (!token.accountId) return {};
    const { email, email_verified } = accountClaims(token.accountId);
    return { email, email_verified };
  },
  findAccount: async (_, sub) => ({ accountId: sub, claims: async () => accountClaims(sub) }),
  features: {
    devInteractions: { enabled: true },
    introspection: {
      enabled: true,
      allowedPolicy: async (ctx, client) => client.clientId === 'gateway-introspection',
    },
    resourceIndicators: {
      enabled: true,
      defaultResource: (ctx, client) => (client.clientId === 'agent-app' ? resource : undefined),
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, indicator) => ({
        scope: scopes,
        audience: indicator,
        accessTokenFormat: opaque.has(indicator) ? 'opaque' : 'jwt',
      }),
    },
  },
  ttl: { AccessToken: 3600, IdToken: 3600, Session: 3600, Grant: 3600, Interaction: 600 },
});
provider.proxy = false;
provider.listen(Number(port), '127.0.0.1', () => console.log(`oidc-provider ready at ${issuer}`));
