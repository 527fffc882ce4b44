/**
 * The publisher client: one method per route of docs/openapi.yaml (channels, publishing, apps and
 * keys, revocation, providers, webhook endpoints, jobs, tokens, devices, pushes and receipts, ack,
 * poll, health, metrics, overview), with request and answer types taken from the generated
 * `src/generated/openapi.ts`. Every failure is a `HeraldError` with the server's code, message and
 * status (and `retryAfter` on 429/503).
 *
 * Meant for app backends (Node). It works in a browser too, but a publisher or admin key must
 * never be shipped to one.
 */

import { HeraldError, NotReadyError, isNotReadyBody } from './errors.js';
import { errorFromAnswer, httpRequest, parseJson, retryAfterSeconds, type FetchLike } from './http.js';
import type { components, operations } from './generated/openapi.js';

export type Schemas = components['schemas'];

type Json<R> = R extends { content: { 'application/json': infer T } } ? T : never;
/** The JSON answer of `Op` with status `S`. */
export type AnswerOf<Op extends keyof operations, S extends keyof operations[Op]['responses']> = Json<
  operations[Op]['responses'][S]
>;
/** The JSON request body of `Op`. */
export type BodyOf<Op extends keyof operations> = operations[Op] extends { requestBody?: infer B }
  ? Json<NonNullable<B>>
  : never;
/** The query parameters of `Op`. */
export type QueryOf<Op extends keyof operations> = NonNullable<operations[Op]['parameters']['query']>;

/**
 * What `revoke` ends: exactly one of every connection of the app, those of a `sub`, of a device, the
 * token with a `jti` (refused until `expires`, seconds since the Unix epoch; default 30 days), or
 * every token issued before a time (seconds; tokens without `iat` too). See docs/push.md.
 */
export type RevokeRequest =
  | { all: true }
  | { sub: string }
  | { device: string }
  | { jti: string; expires?: number }
  | { issued_before: number };

/**
 * A long-poll answer; `disconnect` is set when the server ended the client's access while the poll
 * waited (code `revoked`: do not poll again with the same token). docs/protocol.md, "Revocation".
 */
export type PollAnswer = AnswerOf<'poll', 200> & { disconnect?: { code: string; message: string } };

export interface PublisherOptions {
  /** The server's base URL, `http(s)://host:port`. */
  url: string;
  /** A publisher API key (routes of one app). */
  apiKey?: string;
  /** The admin key (app administration). */
  adminKey?: string;
  fetch?: FetchLike;
  /** How long one request may take; default 10000 ms. */
  timeoutMs?: number;
}

type Auth = 'publisher' | 'admin' | 'either' | 'none';

interface Call {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  path: string;
  auth: Auth;
  query?: Record<string, unknown> | undefined;
  body?: unknown;
  headers?: Record<string, string>;
  /** A bearer token to use instead of a key (client-token routes). */
  bearer?: string;
  /** Statuses of 400 and up the caller reads itself instead of rejecting. */
  accept?: readonly number[];
}

const segment = encodeURIComponent;
/** A channel name in a path: its `/` kept, every segment escaped. */
const channelPath = (name: string) => name.split('/').map(segment).join('/');

export class HeraldPublisher {
  private readonly options: PublisherOptions & { timeoutMs: number };

  constructor(options: PublisherOptions) {
    this.options = { timeoutMs: 10_000, ...options };
  }

  /** `JSON.stringify` and Node's `util.inspect` (`console.log`) never show the keys. */
  toJSON(): Record<string, unknown> {
    return { url: this.options.url, apiKey: this.options.apiKey ? '<redacted>' : null, adminKey: this.options.adminKey ? '<redacted>' : null };
  }

  [Symbol.for('nodejs.util.inspect.custom')](): string {
    return `HeraldPublisher ${JSON.stringify(this.toJSON())}`;
  }

  private key(auth: Auth): string | undefined {
    const { apiKey, adminKey } = this.options;
    switch (auth) {
      case 'publisher':
        return apiKey;
      case 'admin':
        return adminKey;
      case 'either':
        return apiKey ?? adminKey;
      case 'none':
        return undefined;
    }
  }

  private async text(call: Call): Promise<{ status: number; text: string; headers: Headers }> {
    const url = new URL(call.path, this.options.url);
    for (const [name, value] of Object.entries(call.query ?? {})) {
      if (value === undefined || value === null) continue;
      for (const v of Array.isArray(value) ? value : [value]) url.searchParams.append(name, String(v));
    }
    const headers: Record<string, string> = { ...call.headers };
    const bearer = call.bearer ?? this.key(call.auth);
    if (bearer) headers.authorization = `Bearer ${bearer}`;
    return httpRequest(this.fetchImpl(), {
      method: call.method,
      url: url.toString(),
      headers,
      body: call.body,
      timeoutMs: this.options.timeoutMs,
      ...(call.accept === undefined ? {} : { accept: call.accept }),
    });
  }

  private async json<T>(call: Call): Promise<T> {
    return parseJson<T>(await this.text(call));
  }

  private async empty(call: Call): Promise<void> {
    await this.text(call);
  }

  private fetchImpl(): FetchLike {
    const f = this.options.fetch ?? globalThis.fetch;
    if (!f) throw new HeraldError('not_supported', 'no fetch: pass options.fetch');
    return f.bind(globalThis);
  }

  // ---- channels and publishing ----

  listChannels(query?: QueryOf<'listChannels'>): Promise<AnswerOf<'listChannels', 200>> {
    return this.json({ method: 'GET', path: '/v1/channels', auth: 'publisher', query });
  }

  getChannel(name: string): Promise<AnswerOf<'getChannel', 200>> {
    return this.json({ method: 'GET', path: `/v1/channels/${channelPath(name)}`, auth: 'publisher' });
  }

  /** A presence channel's members, in the order they joined (docs/protocol.md section 10). */
  presence(channel: string): Promise<AnswerOf<'getChannelPresence', 200>> {
    return this.json({ method: 'GET', path: `/v1/channels/${channelPath(channel)}/presence`, auth: 'publisher' });
  }

  history(name: string, query?: QueryOf<'getHistory'>): Promise<AnswerOf<'getHistory', 200>> {
    return this.json({ method: 'GET', path: `/v1/channels/${channelPath(name)}/messages`, auth: 'publisher', query });
  }

  /** Publishes `data` to `channel`; `id` is the idempotency key. */
  publish(channel: string, data: unknown, options: { id?: string } = {}): Promise<AnswerOf<'publish', 200>> {
    const body: BodyOf<'publish'> = options.id === undefined ? { data } : { data, id: options.id };
    return this.json({ method: 'POST', path: `/v1/channels/${channelPath(channel)}/messages`, auth: 'publisher', body });
  }

  publishBatch(body: BodyOf<'publishBatch'>): Promise<AnswerOf<'publishBatch', 200>> {
    return this.json({ method: 'POST', path: '/v1/batch', auth: 'publisher', body });
  }

  /** Long-poll with a client token (docs/protocol.md section 6). */
  poll(token: string, query: QueryOf<'poll'> & { channel?: string | string[] }): Promise<PollAnswer> {
    return this.json({ method: 'GET', path: '/v1/poll', auth: 'none', bearer: token, query });
  }

  // ---- server ----

  /** Liveness: the process serves HTTP (`/healthz`). */
  health(): Promise<AnswerOf<'health', 200>> {
    return this.json({ method: 'GET', path: '/healthz', auth: 'none' });
  }

  /** Readiness (`/readyz`): the store takes writes, the bus is connected, the server is not
   * draining. A node that is not ready answers 503, which rejects with a `NotReadyError` (code
   * `not_ready`) whose message names each failing check with its error and whose `readiness` is
   * the whole answer; a 503 without a readiness body (a proxy's page) is a plain `HeraldError`. */
  async ready(): Promise<AnswerOf<'ready', 200>> {
    const answer = await this.text({ method: 'GET', path: '/readyz', auth: 'none', accept: [503] });
    if (answer.status !== 503) return parseJson(answer);
    let body: unknown;
    try {
      body = JSON.parse(answer.text);
    } catch {
      body = undefined;
    }
    if (!isNotReadyBody(body)) throw errorFromAnswer(answer);
    const retryAfter = retryAfterSeconds(answer.headers);
    throw new NotReadyError(body, retryAfter === undefined ? {} : { retryAfter });
  }

  /** Live figures: with the admin key the whole server and every app, with a publisher key
   * its own app. Counters are cumulative; two answers make rates. */
  overview(): Promise<AnswerOf<'overview', 200>> {
    return this.json({ method: 'GET', path: '/v1/overview', auth: 'either' });
  }

  /** The Prometheus exposition text. */
  async metrics(): Promise<string> {
    return (await this.text({ method: 'GET', path: '/metrics', auth: 'none' })).text;
  }

  /** The server's own OpenAPI document (YAML text). */
  async openapi(): Promise<string> {
    return (await this.text({ method: 'GET', path: '/v1/openapi.yaml', auth: 'none' })).text;
  }

  // ---- apps and keys ----

  listApps(): Promise<AnswerOf<'listApps', 200>> {
    return this.json({ method: 'GET', path: '/v1/apps', auth: 'admin' });
  }

  createApp(body: BodyOf<'createApp'>): Promise<AnswerOf<'createApp', 201>> {
    return this.json({ method: 'POST', path: '/v1/apps', auth: 'admin', body });
  }

  getApp(id: string): Promise<AnswerOf<'getApp', 200>> {
    return this.json({ method: 'GET', path: `/v1/apps/${segment(id)}`, auth: 'either' });
  }

  updateApp(id: string, body: BodyOf<'updateApp'>): Promise<AnswerOf<'updateApp', 200>> {
    return this.json({ method: 'PATCH', path: `/v1/apps/${segment(id)}`, auth: 'admin', body });
  }

  deleteApp(id: string): Promise<void> {
    return this.empty({ method: 'DELETE', path: `/v1/apps/${segment(id)}`, auth: 'admin' });
  }

  listKeys(appId: string): Promise<AnswerOf<'listKeys', 200>> {
    return this.json({ method: 'GET', path: `/v1/apps/${segment(appId)}/keys`, auth: 'admin' });
  }

  addKey(appId: string, body: BodyOf<'addKey'> = {}): Promise<AnswerOf<'addKey', 201>> {
    return this.json({ method: 'POST', path: `/v1/apps/${segment(appId)}/keys`, auth: 'admin', body });
  }

  deleteKey(appId: string, keyId: string): Promise<void> {
    return this.empty({ method: 'DELETE', path: `/v1/apps/${segment(appId)}/keys/${segment(keyId)}`, auth: 'admin' });
  }

  /**
   * Disconnects an app's clients or revokes its tokens (admin key or the app's publisher key):
   * exactly one of `{ all: true }`, `{ sub }`, `{ device }`, `{ jti, expires? }`,
   * `{ issued_before }`. Answers how many connections this node closed.
   */
  revoke(appId: string, body: RevokeRequest & BodyOf<'revoke'>): Promise<AnswerOf<'revoke', 200>> {
    return this.json({ method: 'POST', path: `/v1/apps/${segment(appId)}/revoke`, auth: 'either', body });
  }

  /** What verifies the app's client tokens: HS256 or not, public keys, JWKS URL (never a secret). */
  getTokenKeys(appId: string): Promise<AnswerOf<'getTokenKeys', 200>> {
    return this.json({ method: 'GET', path: `/v1/apps/${segment(appId)}/token-keys`, auth: 'either' });
  }

  /**
   * Replaces the app's public keys (RS256, ES256; PEM) and JWKS URL; `hs256: false` drops its HS256
   * secret (its backend then mints every token). docs/push.md, "Token keys".
   */
  setTokenKeys(appId: string, body: BodyOf<'setTokenKeys'>): Promise<AnswerOf<'setTokenKeys', 200>> {
    return this.json({ method: 'PUT', path: `/v1/apps/${segment(appId)}/token-keys`, auth: 'either', body });
  }

  /**
   * A new HS256 token secret (shown only in this answer); the old one keeps verifying tokens for
   * `overlap` seconds (default 3600, 0 for none).
   */
  rotateTokenSecret(appId: string, body: BodyOf<'rotateTokenSecret'> = {}): Promise<AnswerOf<'rotateTokenSecret', 200>> {
    return this.json({ method: 'POST', path: `/v1/apps/${segment(appId)}/token-secret`, auth: 'either', body });
  }

  /**
   * The audit log of admin actions, newest first, a page at a time (`next_cursor` names the next
   * page): every app's with the admin key, the key's own app's with a publisher key.
   */
  listAuditEntries(query?: QueryOf<'listAuditEntries'>): Promise<AnswerOf<'listAuditEntries', 200>> {
    return this.json({ method: 'GET', path: '/v1/audit', auth: 'either', query });
  }

  appStats(appId: string): Promise<AnswerOf<'appStats', 200>> {
    return this.json({ method: 'GET', path: `/v1/apps/${segment(appId)}/stats`, auth: 'either' });
  }

  // ---- providers ----

  listProviders(appId: string): Promise<AnswerOf<'listProviders', 200>> {
    return this.json({ method: 'GET', path: `/v1/apps/${segment(appId)}/providers`, auth: 'either' });
  }

  getProvider(appId: string, provider: Schemas['Provider']): Promise<AnswerOf<'getProvider', 200>> {
    return this.json({ method: 'GET', path: `/v1/apps/${segment(appId)}/providers/${segment(provider)}`, auth: 'either' });
  }

  setProvider(appId: string, provider: Schemas['Provider'], body: BodyOf<'setProvider'>): Promise<AnswerOf<'setProvider', 200>> {
    return this.json({ method: 'PUT', path: `/v1/apps/${segment(appId)}/providers/${segment(provider)}`, auth: 'either', body });
  }

  deleteProvider(appId: string, provider: Schemas['Provider']): Promise<void> {
    return this.empty({ method: 'DELETE', path: `/v1/apps/${segment(appId)}/providers/${segment(provider)}`, auth: 'either' });
  }

  /** The app's VAPID public key (public: no key needed). */
  vapidPublicKey(appId: string): Promise<AnswerOf<'vapidPublicKey', 200>> {
    return this.json({ method: 'GET', path: `/v1/apps/${segment(appId)}/vapid-public-key`, auth: 'none' });
  }

  // ---- webhook endpoints ----

  /** The app's webhook endpoints with their delivery state (never a signing secret). */
  listHooks(appId: string): Promise<AnswerOf<'listHooks', 200>> {
    return this.json({ method: 'GET', path: `/v1/apps/${segment(appId)}/hooks`, auth: 'either' });
  }

  /** Registers a webhook endpoint; the answer's `secret` (`whsec_...`) is shown only this once. */
  createHook(appId: string, body: BodyOf<'createHook'>): Promise<AnswerOf<'createHook', 201>> {
    return this.json({ method: 'POST', path: `/v1/apps/${segment(appId)}/hooks`, auth: 'either', body });
  }

  getHook(appId: string, hookId: string | number): Promise<AnswerOf<'getHook', 200>> {
    return this.json({ method: 'GET', path: `/v1/apps/${segment(appId)}/hooks/${segment(String(hookId))}`, auth: 'either' });
  }

  updateHook(appId: string, hookId: string | number, body: BodyOf<'updateHook'>): Promise<AnswerOf<'updateHook', 200>> {
    return this.json({ method: 'PATCH', path: `/v1/apps/${segment(appId)}/hooks/${segment(String(hookId))}`, auth: 'either', body });
  }

  deleteHook(appId: string, hookId: string | number): Promise<void> {
    return this.empty({ method: 'DELETE', path: `/v1/apps/${segment(appId)}/hooks/${segment(String(hookId))}`, auth: 'either' });
  }

  /**
   * A new signing secret (shown only in this answer); the old one keeps signing requests too for
   * `overlap_seconds` (default 86400, 0 for none, at most 7 days).
   */
  rotateHookSecret(appId: string, hookId: string | number, body: BodyOf<'rotateHookSecret'> = {}): Promise<AnswerOf<'rotateHookSecret', 200>> {
    return this.json({ method: 'POST', path: `/v1/apps/${segment(appId)}/hooks/${segment(String(hookId))}/rotate-secret`, auth: 'either', body });
  }

  /** Sends one signed `hook.test` event to the endpoint now and answers how it responded. */
  testHook(appId: string, hookId: string | number): Promise<AnswerOf<'testHook', 200>> {
    return this.json({ method: 'POST', path: `/v1/apps/${segment(appId)}/hooks/${segment(String(hookId))}/test`, auth: 'either' });
  }

  listHookDeadLetters(appId: string, hookId: string | number, query?: QueryOf<'listHookDeadLetters'>): Promise<AnswerOf<'listHookDeadLetters', 200>> {
    return this.json({ method: 'GET', path: `/v1/apps/${segment(appId)}/hooks/${segment(String(hookId))}/dead`, auth: 'either', query });
  }

  replayHookDeadLetter(appId: string, hookId: string | number, row: string | number): Promise<AnswerOf<'replayHookDeadLetter', 202>> {
    return this.json({ method: 'POST', path: `/v1/apps/${segment(appId)}/hooks/${segment(String(hookId))}/dead/${segment(String(row))}/replay`, auth: 'either' });
  }

  dropHookDeadLetter(appId: string, hookId: string | number, row: string | number): Promise<void> {
    return this.empty({ method: 'DELETE', path: `/v1/apps/${segment(appId)}/hooks/${segment(String(hookId))}/dead/${segment(String(row))}`, auth: 'either' });
  }

  // ---- jobs ----

  jobStats(): Promise<AnswerOf<'jobStats', 200>> {
    return this.json({ method: 'GET', path: '/v1/jobs/stats', auth: 'publisher' });
  }

  listDeadLetters(query?: QueryOf<'listDeadLetters'>): Promise<AnswerOf<'listDeadLetters', 200>> {
    return this.json({ method: 'GET', path: '/v1/jobs/dead', auth: 'publisher', query });
  }

  dropDeadLetter(jobId: string | number): Promise<void> {
    return this.empty({ method: 'DELETE', path: `/v1/jobs/${segment(String(jobId))}`, auth: 'publisher' });
  }

  replayDeadLetter(jobId: string | number): Promise<AnswerOf<'replayDeadLetter', 202>> {
    return this.json({ method: 'POST', path: `/v1/jobs/${segment(String(jobId))}/replay`, auth: 'publisher' });
  }

  // ---- tokens ----

  /** Asks the server to mint a client token for this key's app. */
  mintToken(body: BodyOf<'mintToken'>): Promise<AnswerOf<'mintToken', 200>> {
    return this.json({ method: 'POST', path: '/v1/tokens', auth: 'publisher', body });
  }

  // ---- devices ----

  listDevices(query?: QueryOf<'listDevices'>): Promise<AnswerOf<'listDevices', 200>> {
    return this.json({ method: 'GET', path: '/v1/devices', auth: 'publisher', query });
  }

  registerDevice(body: BodyOf<'registerDevice'>): Promise<AnswerOf<'registerDevice', 200>> {
    return this.json({ method: 'POST', path: '/v1/devices', auth: 'publisher', body });
  }

  registerDevices(body: BodyOf<'registerDevices'>): Promise<AnswerOf<'registerDevices', 200>> {
    return this.json({ method: 'POST', path: '/v1/devices/batch', auth: 'publisher', body });
  }

  /** A device's acknowledged inbox positions and its recent pushes with their receipts. */
  deviceInbox(id: string): Promise<AnswerOf<'deviceInbox', 200>> {
    return this.json({ method: 'GET', path: `/v1/devices/${segment(id)}/inbox`, auth: 'publisher' });
  }

  getDevice(id: string): Promise<AnswerOf<'getDevice', 200>> {
    return this.json({ method: 'GET', path: `/v1/devices/${segment(id)}`, auth: 'publisher' });
  }

  updateDevice(id: string, body: BodyOf<'patchDevice'>): Promise<AnswerOf<'patchDevice', 200>> {
    return this.json({ method: 'PATCH', path: `/v1/devices/${segment(id)}`, auth: 'publisher', body });
  }

  deleteDevice(id: string): Promise<void> {
    return this.empty({ method: 'DELETE', path: `/v1/devices/${segment(id)}`, auth: 'publisher' });
  }

  activateDevice(id: string): Promise<AnswerOf<'activateDevice', 200>> {
    return this.json({ method: 'POST', path: `/v1/devices/${segment(id)}/activate`, auth: 'publisher' });
  }

  deactivateDevice(id: string): Promise<AnswerOf<'deactivateDevice', 200>> {
    return this.json({ method: 'POST', path: `/v1/devices/${segment(id)}/deactivate`, auth: 'publisher' });
  }

  // ---- pushes and receipts ----

  push(body: BodyOf<'push'>, options: { idempotencyKey?: string } = {}): Promise<AnswerOf<'push', 202>> {
    const headers = options.idempotencyKey ? { 'idempotency-key': options.idempotencyKey } : undefined;
    return this.json({ method: 'POST', path: '/v1/push', auth: 'publisher', body, ...(headers ? { headers } : {}) });
  }

  getReceipt(pushId: string, query?: QueryOf<'getReceipt'>): Promise<AnswerOf<'getReceipt', 200>> {
    return this.json({ method: 'GET', path: `/v1/push/${segment(pushId)}`, auth: 'publisher', query });
  }

  /** Acknowledges a device's inbox with its device token (what a device does after SSE/long-poll). */
  ack(deviceToken: string, body: BodyOf<'ack'>): Promise<AnswerOf<'ack', 200>> {
    return this.json({ method: 'POST', path: '/v1/ack', auth: 'none', bearer: deviceToken, body });
  }
}
