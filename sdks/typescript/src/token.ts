/**
 * Client tokens (docs/protocol.md section 3): minting HS256 JWTs for an app backend (with the
 * platform's WebCrypto, so it works in Node and browsers), and reading a token's claims without
 * checking its signature (the client uses that to know whether it holds a device token).
 */

/** The claims of a client token; empty ones are left out of the token. */
export interface TokenClaims {
  sub?: string;
  /** Expiry, seconds since the Unix epoch. */
  exp?: number;
  channels?: string[];
  publish?: string[];
  device?: string;
  /** Issued at, seconds since the Unix epoch (a revocation by issue time compares it). */
  iat?: number;
  /** The token's id (1 to 128 printable ASCII characters), to revoke it by. */
  jti?: string;
  /** What presence channels show of the user (its member data): a JSON object. */
  user_info?: Record<string, unknown>;
}

const encoder = new TextEncoder();

function base64url(bytes: Uint8Array): string {
  let binary = '';
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

function fromBase64url(text: string): string {
  const b64 = text.replace(/-/g, '+').replace(/_/g, '/');
  const binary = atob(b64 + '='.repeat((4 - (b64.length % 4)) % 4));
  const bytes = Uint8Array.from(binary, (c) => c.charCodeAt(0));
  return new TextDecoder().decode(bytes);
}

/**
 * Mints a client token signed with `secret` (the server's `token_secret` for the `default` app,
 * else the app's `token_secret`, with `kid` = the app id). Deterministic: the same claims give the
 * same token. Keep the secret on your backend; never mint in a browser.
 */
export async function mintToken(secret: string, claims: TokenClaims, app = 'default'): Promise<string> {
  const header = app === 'default' ? { typ: 'JWT', alg: 'HS256' } : { typ: 'JWT', alg: 'HS256', kid: app };
  const ordered: Record<string, unknown> = {};
  if (claims.sub) ordered.sub = claims.sub;
  if (claims.exp !== undefined) ordered.exp = claims.exp;
  if (claims.channels && claims.channels.length > 0) ordered.channels = claims.channels;
  if (claims.publish && claims.publish.length > 0) ordered.publish = claims.publish;
  if (claims.device) ordered.device = claims.device;
  if (claims.iat !== undefined) ordered.iat = claims.iat;
  if (claims.jti) ordered.jti = claims.jti;
  if (claims.user_info) ordered.user_info = claims.user_info;
  const signingInput = `${base64url(encoder.encode(JSON.stringify(header)))}.${base64url(encoder.encode(JSON.stringify(ordered)))}`;
  const key = await crypto.subtle.importKey('raw', encoder.encode(secret), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
  const signature = new Uint8Array(await crypto.subtle.sign('HMAC', key, encoder.encode(signingInput)));
  return `${signingInput}.${base64url(signature)}`;
}

/**
 * The claims of `token`, read without checking the signature (only the server can check it);
 * `undefined` when it is not a readable JWT.
 */
export function readTokenClaims(token: string): (TokenClaims & Record<string, unknown>) | undefined {
  const parts = token.split('.');
  if (parts.length !== 3 || parts[1] === undefined) return undefined;
  try {
    const claims: unknown = JSON.parse(fromBase64url(parts[1]));
    return typeof claims === 'object' && claims !== null && !Array.isArray(claims)
      ? (claims as TokenClaims & Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}
