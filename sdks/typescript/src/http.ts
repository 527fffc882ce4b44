/**
 * One HTTP request with `fetch`, bounded in time, whose failures all become `HeraldError`: the
 * server's `{"error":{"code","message"}}` with its status (and `Retry-After`), or `network`,
 * `timeout` and `protocol` errors of the client's own.
 */

import { HeraldError, errorFromBody } from './errors.js';

export type FetchLike = typeof fetch;

export interface HttpRequest {
  method: string;
  url: string;
  headers?: Record<string, string>;
  /** A JSON body (serialized here), or a string sent as is. */
  body?: unknown;
  timeoutMs: number;
  /** Statuses of 400 and up answered as they are instead of rejecting (their caller reads them). */
  accept?: readonly number[];
}

export interface HttpAnswer {
  status: number;
  headers: Headers;
  text: string;
}

export function retryAfterSeconds(headers: Headers): number | undefined {
  const value = headers.get('retry-after');
  if (value === null || !/^[0-9]+$/.test(value.trim())) return undefined;
  return Number(value.trim());
}

/** Turns a failed answer (status 400 and up) into the `HeraldError` it carries. */
export function errorFromAnswer(answer: HttpAnswer): HeraldError {
  const retryAfter = retryAfterSeconds(answer.headers);
  const options = { status: answer.status, ...(retryAfter === undefined ? {} : { retryAfter }) };
  let body: unknown;
  try {
    body = JSON.parse(answer.text);
  } catch {
    body = undefined;
  }
  return (
    errorFromBody(body, options) ??
    new HeraldError('protocol', `HTTP ${answer.status} without a Herald error body: ${answer.text.slice(0, 200)}`, options)
  );
}

/** Turns what `fetch` threw into a `HeraldError`. */
export function errorFromFetch(e: unknown, what: string, timedOut: boolean): HeraldError {
  if (e instanceof HeraldError) return e;
  if (timedOut) return new HeraldError('timeout', `${what}: no answer in time`, { cause: e });
  return new HeraldError('network', `${what}: ${(e as Error)?.message ?? String(e)}`, { cause: e });
}

/** Sends the request and reads the whole answer; rejects with `HeraldError` on status >= 400. */
export async function httpRequest(fetchImpl: FetchLike, request: HttpRequest): Promise<HttpAnswer> {
  const controller = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort();
  }, request.timeoutMs);
  const headers: Record<string, string> = { ...request.headers };
  let body: string | undefined;
  if (request.body !== undefined) {
    body = typeof request.body === 'string' ? request.body : JSON.stringify(request.body);
    headers['content-type'] ??= 'application/json';
  }
  const what = `${request.method} ${new URL(request.url).pathname}`;
  try {
    const response = await fetchImpl(request.url, {
      method: request.method,
      headers,
      ...(body === undefined ? {} : { body }),
      signal: controller.signal,
    });
    const answer = { status: response.status, headers: response.headers, text: await response.text() };
    if (answer.status >= 400 && !request.accept?.includes(answer.status)) throw errorFromAnswer(answer);
    return answer;
  } catch (e) {
    throw errorFromFetch(e, what, timedOut);
  } finally {
    clearTimeout(timer);
  }
}

/** Parses a JSON answer body; a body that is not JSON is a `protocol` error. */
export function parseJson<T>(answer: HttpAnswer): T {
  try {
    return JSON.parse(answer.text) as T;
  } catch {
    throw new HeraldError('protocol', `answer is not JSON: ${answer.text.slice(0, 200)}`, { status: answer.status });
  }
}
