/**
 * Errors: every failure the SDK reports is a `HeraldError` carrying a `code` (the server's error
 * code when the server answered, else one of the client-side codes below), the server's
 * `message`, and the HTTP `status` when there was an HTTP answer. A readiness probe that finds the
 * node not ready rejects with its subclass `NotReadyError`, which carries the whole answer.
 */

import type { components } from './generated/openapi.js';

/** The error codes of docs/protocol.md section 7, with the HTTP status that carries each. */
export const SERVER_ERROR_STATUS = {
  bad_request: 400,
  unknown_command: 400,
  channel_invalid: 400,
  already_subscribed: 400,
  not_subscribed: 400,
  too_many_subscriptions: 400,
  tag_invalid: 400,
  tag_expression_invalid: 400,
  device_invalid: 400,
  unauthorized: 401,
  token_expired: 401,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  method_not_allowed: 405,
  too_large: 413,
  request_timeout: 408,
  limit_exceeded: 429,
  rate_limited: 429,
  store_failed: 500,
  store_unavailable: 503,
  insufficient_storage: 507,
  store_halted: 503,
  internal: 500,
  shutting_down: 503,
} as const;

/** A code the server sends in an error answer or `error` frame. */
export type ServerErrorCode = keyof typeof SERVER_ERROR_STATUS;

/**
 * Codes the SDK itself reports:
 * - `network`: the server could not be reached, or the connection broke;
 * - `timeout`: no answer within the request timeout;
 * - `protocol`: the server sent something this SDK cannot read (an HTTP answer that is not the
 *   documented JSON, a malformed frame);
 * - `not_connected`: the client is closed, or not connected within the request timeout;
 * - `not_supported`: the current transport cannot do this (publish over SSE);
 * - `handler_failed`: a message handler threw or its promise rejected;
 * - `token_unavailable`: the token callback threw or did not return a string;
 * - `not_ready`: `ready()` (`GET /readyz`) answered 503 with its readiness body (`not_ready` is
 *   that body's status word): a `NotReadyError`.
 */
export type ClientErrorCode =
  | 'network'
  | 'timeout'
  | 'protocol'
  | 'not_connected'
  | 'not_supported'
  | 'handler_failed'
  | 'token_unavailable'
  | 'not_ready';

export type HeraldErrorCode = ServerErrorCode | ClientErrorCode;

/** Whether `code` is one of the server's error codes (exactly, case included). */
export function isServerErrorCode(code: unknown): code is ServerErrorCode {
  return typeof code === 'string' && Object.prototype.hasOwnProperty.call(SERVER_ERROR_STATUS, code);
}

export interface HeraldErrorOptions {
  status?: number;
  /** Seconds from a `Retry-After` header (429 and 503 answers). */
  retryAfter?: number;
  /** The channel a subscribe, publish or message handler failed on. */
  channel?: string;
  cause?: unknown;
}

/** The one error type of the SDK. */
export class HeraldError extends Error {
  readonly code: HeraldErrorCode;
  /** The HTTP status of the answer, when there was one. */
  readonly status?: number;
  /** Seconds the server asked to wait (`Retry-After`), on 429 and 503 answers that carry it. */
  readonly retryAfter?: number;
  /** The channel concerned, for subscription, publish and handler errors. */
  readonly channel?: string;

  constructor(code: HeraldErrorCode, message: string, options: HeraldErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'HeraldError';
    this.code = code;
    if (options.status !== undefined) this.status = options.status;
    if (options.retryAfter !== undefined) this.retryAfter = options.retryAfter;
    if (options.channel !== undefined) this.channel = options.channel;
  }

  /** Whether retrying the same request later may succeed (5xx, 429, network, timeout). */
  get retryable(): boolean {
    if (this.code === 'network' || this.code === 'timeout') return true;
    return this.status !== undefined && (this.status >= 500 || this.status === 429);
  }
}

/**
 * Reads the server's error body `{"error":{"code","message"}}`; `undefined` when `body` is not
 * one (an unknown code is kept as `protocol`, with the server's text in the message).
 */
export function errorFromBody(
  body: unknown,
  options: HeraldErrorOptions = {},
): HeraldError | undefined {
  if (typeof body !== 'object' || body === null) return undefined;
  const error = (body as { error?: unknown }).error;
  if (typeof error !== 'object' || error === null) return undefined;
  const { code, message } = error as { code?: unknown; message?: unknown };
  if (typeof message !== 'string' || typeof code !== 'string') return undefined;
  if (!isServerErrorCode(code)) {
    return new HeraldError('protocol', `unknown error code ${JSON.stringify(code)}: ${message}`, options);
  }
  return new HeraldError(code, message, options);
}

/** What `GET /readyz` answers (docs/openapi.yaml, the `Readiness` schema). */
export type Readiness = components['schemas']['Readiness'];

/**
 * A check `/readyz` found failing, with its error as the server gave it: `store` (for instance
 * `insufficient_storage`), `bus` (`bus_unavailable`), or `draining` (which carries no error of its
 * own: `shutting_down`).
 */
export interface FailingCheck {
  check: 'store' | 'bus' | 'draining';
  code: string;
  message: string;
}

/** Whether `body` is a readiness answer that says not ready (not a proxy's 503 page). */
export function isNotReadyBody(body: unknown): body is Readiness {
  if (typeof body !== 'object' || body === null) return false;
  const { status, checks } = body as { status?: unknown; checks?: unknown };
  return status === 'not_ready' && typeof checks === 'object' && checks !== null;
}

/** Each failing check of `readiness`, in the order store, bus, draining. */
function failingChecks(readiness: Readiness): FailingCheck[] {
  const failing: FailingCheck[] = [];
  const checks: Partial<Readiness['checks']> = readiness.checks ?? {};
  for (const check of ['store', 'bus'] as const) {
    const found = checks[check];
    if (found === undefined || found === null || found.status === 'ok') continue;
    const error: { code?: unknown; message?: unknown } = found.error ?? {};
    failing.push({
      check,
      code: typeof error.code === 'string' ? error.code : 'protocol',
      message: typeof error.message === 'string' ? error.message : `status ${JSON.stringify(found.status)}`,
    });
  }
  if (checks.draining === true) {
    failing.push({ check: 'draining', code: 'shutting_down', message: 'the server is shutting down' });
  }
  return failing;
}

/**
 * `ready()` found the node not ready: `GET /readyz` answered 503 with its readiness body. `code`
 * is `not_ready`, `status` 503, the message names each failing check with its error
 * (`store: insufficient_storage: ...`; several joined by `; `), `failing` lists them and
 * `readiness` is the whole answer. A 503 that is not a readiness body (a proxy's page) is a plain
 * `HeraldError` instead.
 */
export class NotReadyError extends HeraldError {
  /** What `/readyz` answered. */
  readonly readiness: Readiness;
  /** Each failing check with its error, in the order store, bus, draining. */
  readonly failing: readonly FailingCheck[];

  constructor(readiness: Readiness, options: Omit<HeraldErrorOptions, 'status' | 'channel'> = {}) {
    const failing = failingChecks(readiness);
    const named = failing.map((f) => `${f.check}: ${f.code}: ${f.message}`).join('; ');
    super('not_ready', named || 'not ready', { ...options, status: 503 });
    this.name = 'NotReadyError';
    this.readiness = readiness;
    this.failing = failing;
  }
}
