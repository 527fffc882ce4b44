/**
 * One Server-Sent Events stream from `/v1/sse`, read with `fetch` and the SDK's own parser (so it
 * runs in Node 20, sends the token in an `Authorization` header instead of the URL, and reads the
 * server's JSON error answers: a refused stream is a `HeraldError` with the server's code and
 * status). Reports `subscribed` events, messages with their cursor strings and the `disconnect`
 * event to its sink.
 */

import { HeraldError } from '../errors.js';
import { errorFromAnswer, errorFromFetch, type FetchLike } from '../http.js';
import { checkMessage, type Disconnect, type PresenceFrame, type SubscribeReply } from '../protocol.js';
import { SseParser } from './sse-parser.js';
import type { ConnectionSink } from './types.js';

export interface SseOptions {
  openTimeoutMs: number;
  /** The longest silence before the stream counts as dead (the server writes at least every 50 s). */
  idleTimeoutMs: number;
}

export class SseConnection {
  readonly kind = 'sse' as const;
  private done = false;
  private disconnect: Disconnect | undefined;
  private idleTimer: ReturnType<typeof setTimeout> | undefined;

  private constructor(
    private readonly controller: AbortController,
    private readonly sink: ConnectionSink,
    private readonly options: SseOptions,
  ) {}

  /** Opens the stream; rejects with the server's error if it answers with one. */
  static async open(
    fetchImpl: FetchLike,
    url: string,
    token: string | undefined,
    sink: ConnectionSink,
    options: SseOptions,
  ): Promise<SseConnection> {
    const controller = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort();
    }, options.openTimeoutMs);
    let response: Response;
    try {
      response = await fetchImpl(url, {
        headers: { accept: 'text/event-stream', ...(token ? { authorization: `Bearer ${token}` } : {}) },
        signal: controller.signal,
        cache: 'no-store',
      });
    } catch (e) {
      clearTimeout(timer);
      throw errorFromFetch(e, 'GET /v1/sse', timedOut);
    }
    if (response.status !== 200 || !response.body) {
      let text = '';
      try {
        text = await response.text();
      } catch {
        /* the error status says enough */
      } finally {
        clearTimeout(timer);
      }
      throw errorFromAnswer({ status: response.status, headers: response.headers, text });
    }
    clearTimeout(timer);
    const connection = new SseConnection(controller, sink, options);
    void connection.read(response.body);
    return connection;
  }

  private armIdleTimer(): void {
    clearTimeout(this.idleTimer);
    this.idleTimer = setTimeout(() => {
      this.finish({ code: 'connection_lost', message: `nothing received for ${this.options.idleTimeoutMs} ms` });
      this.controller.abort();
    }, this.options.idleTimeoutMs);
  }

  private async read(body: ReadableStream<Uint8Array>): Promise<void> {
    const parser = new SseParser();
    const decoder = new TextDecoder();
    const reader = body.getReader();
    this.armIdleTimer();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done || this.done) break;
        this.armIdleTimer();
        for (const event of parser.push(decoder.decode(value, { stream: true }))) {
          if (this.done) break;
          this.onEvent(event.event, event.id, event.data);
        }
      }
    } catch (e) {
      if (!this.done) this.finish({ code: 'connection_lost', message: `the SSE stream broke: ${(e as Error).message}` });
      return;
    } finally {
      clearTimeout(this.idleTimer);
    }
    const d = this.disconnect;
    this.finish(d ? { code: d.code, message: d.message } : { code: 'connection_lost', message: 'the SSE stream ended' });
  }

  private onEvent(name: string | null, id: string | null, data: string): void {
    let body: unknown;
    try {
      body = JSON.parse(data);
    } catch {
      this.sink.error(new HeraldError('protocol', `an SSE event whose data is not JSON: ${data.slice(0, 200)}`));
      return;
    }
    try {
      if (name === null || name === 'message') {
        this.sink.message(checkMessage(body), id);
      } else if (name === 'subscribed') {
        this.sink.subscribed(body as SubscribeReply);
      } else if (name === 'presence') {
        this.sink.presence(body as PresenceFrame);
      } else if (name === 'disconnect') {
        this.disconnect = body as Disconnect;
      }
    } catch (e) {
      this.sink.error(e instanceof HeraldError ? new HeraldError('protocol', e.message) : (e as HeraldError));
    }
  }

  close(): void {
    this.finish({ code: 'closed', message: 'closed by the client' });
    this.controller.abort();
  }

  private finish(info: { code: string; message: string }): void {
    if (this.done) return;
    this.done = true;
    clearTimeout(this.idleTimer);
    this.sink.closed(info);
  }
}
