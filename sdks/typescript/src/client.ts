/**
 * The subscriber client: one logical connection to Herald that survives reconnects. It owns the
 * per-channel cursors (exact resume: `since` on every resubscribe, duplicates dropped, so a
 * handler sees each message once and in order), the choice of transport (WebSocket, else SSE),
 * reconnecting with capped exponential backoff and full jitter, the token callback, the device
 * inbox with manual or automatic acks, and the typed events.
 */

import { Backoff } from './backoff.js';
import { Emitter } from './emitter.js';
import { HeraldError, isServerErrorCode } from './errors.js';
import type { Position } from './cursor.js';
import { httpRequest, type FetchLike } from './http.js';
import type { ConnectReply, HistoryReply, PresenceMember, PublishReply, SubscribeReply } from './protocol.js';
import { readTokenClaims } from './token.js';
import { SseConnection } from './transport/sse.js';
import { planSseStreams } from './transport/sse-plan.js';
import type { CloseInfo, ConnectionSink, WebSocketConstructor } from './transport/types.js';
import { WebSocketConnection } from './transport/websocket.js';
import type { InboxHandler, InboxOptions } from './inbox.js';
import { Delivery } from './delivery.js';
import type {
  ClientEvents,
  ClientOptions,
  DisconnectedEvent,
  MessageHandler,
  SubscribeOptions,
} from './client-types.js';
import { Subscription } from './subscription.js';

export type * from './client-types.js';
export { Subscription } from './subscription.js';


type Connection = WebSocketConnection | SseConnection;

/** Thrown by a connection attempt that should be retried at once, with nothing to report. */
class RetryNow extends Error {}

const sleep = (ms: number, signal: { wake?: () => void }) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.wake = () => {
      clearTimeout(timer);
      resolve();
    };
  });

export class HeraldClient extends Emitter<ClientEvents> {
  private readonly options: Required<Pick<ClientOptions, 'requestTimeoutMs' | 'pingIntervalMs' | 'sseIdleTimeoutMs' | 'refreshBeforeExpiryMs' | 'transport'>> & ClientOptions;
  private readonly delivery = new Delivery({
    emit: (name, event) => this.emit(name, event),
    ack: (channel, seq, epoch) => this.ack(channel, seq, epoch),
    subscribed: () => {
      // SSE adding new channels one at a time: open the next once this one is confirmed.
      if (this.sseOneAtATime && this.connections[0] instanceof SseConnection && [...this.subs.values()].some((x) => !x.everSubscribed)) {
        this.requestReopen();
      }
    },
  });
  private readonly subs = this.delivery.subs;
  private readonly inboxState = this.delivery.inbox;
  private readonly backoff: Backoff;
  private connections: Connection[] = [];
  private currentToken: string | undefined;
  private running = false;
  private closed = false;
  private connectedWaiters = new Set<() => void>();
  private wakeUp: { wake?: () => void } = {};
  /** Set when the SSE channel set changed: reopen at once, without events. */
  private reopenRequested = false;
  /** SSE: add new channels one at a time (after a refused batch, to tell which one was refused). */
  private sseOneAtATime = false;
  /** A server closed a WebSocket with 1009 after a batch: subscribes go one a message from then on. */
  private batchesTooBig = false;

  constructor(options: ClientOptions) {
    super();
    this.options = {
      transport: 'auto',
      requestTimeoutMs: 10_000,
      pingIntervalMs: 25_000,
      sseIdleTimeoutMs: 60_000,
      refreshBeforeExpiryMs: 30_000,
      ...options,
    };
    this.backoff = new Backoff(options.backoff);
  }

  /** Node's `util.inspect` (and `console.log`) shows no token. */
  [Symbol.for('nodejs.util.inspect.custom')](): string {
    return `HeraldClient { url: ${JSON.stringify(this.options.url)}, transport: ${this.transport}, channels: ${JSON.stringify([...this.subs.keys()])} }`;
  }

  /** The transport in use, or `null` while not connected. */
  get transport(): 'websocket' | 'sse' | null {
    return this.connections[0]?.kind ?? null;
  }

  get isConnected(): boolean {
    return this.connections.length > 0;
  }

  /** Starts connecting (and reconnecting until `close`). Resolves once connected the first time. */
  connect(): Promise<void> {
    if (this.closed) return Promise.reject(new HeraldError('not_connected', 'the client is closed'));
    if (!this.running) {
      this.running = true;
      void this.loop();
    }
    return this.whenConnected(Number.POSITIVE_INFINITY);
  }

  /** Stops the client: closes the connection and does not reconnect. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.wakeUp.wake?.();
    for (const c of this.connections) c.close();
    this.connections = [];
  }

  /**
   * Subscribes `handler` to `channel`. Messages reach the handler one at a time, in order, each
   * once, across reconnects; a handler's promise is awaited before the next message.
   */
  subscribe<T = unknown>(channel: string, handler: MessageHandler<T>, options: SubscribeOptions = {}): Subscription {
    const existing = this.subs.get(channel);
    if (existing) {
      const error = new HeraldError('already_subscribed', `already subscribed to ${JSON.stringify(channel)}`, { channel });
      const duplicate = new Subscription(channel, handler as MessageHandler<never>, options.last, options.since, this);
      duplicate.rejectReady(error);
      return duplicate;
    }
    const presence = { presence: options.presence, member: options.member, onPresence: options.onPresence };
    const sub = new Subscription(channel, handler as MessageHandler<never>, options.last, options.since, this, presence);
    this.subs.set(channel, sub);
    const connection = this.connections[0];
    if (connection instanceof WebSocketConnection) this.sendSubscribe(connection, sub);
    else if (connection instanceof SseConnection) this.requestReopen();
    return sub;
  }

  /**
   * The members of a channel subscribed with `presence: true`, in the order they joined, as its
   * presence events left them (relisted by the server on every resubscribe); `undefined` before
   * they were first listed, or for a channel without presence.
   */
  members(channel: string): PresenceMember[] | undefined {
    return this.subs.get(channel)?.members ?? undefined;
  }

  /** Stops delivering `channel`; its cursor is forgotten. */
  async unsubscribe(channel: string): Promise<void> {
    const sub = this.subs.get(channel);
    if (!sub) return;
    this.subs.delete(channel);
    const connection = this.connections[0];
    if (connection instanceof WebSocketConnection && sub.everSubscribed) {
      await connection.request('unsubscribe', { channel }).catch((e: HeraldError) => {
        if (e.code !== 'not_subscribed' && isServerErrorCode(e.code)) throw e;
      });
    } else if (connection instanceof SseConnection) {
      this.requestReopen();
    }
  }

  /**
   * Receives the device inbox (needs a device token). Register it before `connect`. With
   * `ack: 'auto'` (default) each push is acknowledged after the handler returns (or its promise
   * resolves); with `'manual'` call `message.ack()`.
   */
  inbox<T = unknown>(handler: InboxHandler<T>, options: InboxOptions = {}): void {
    this.inboxState.handler = handler as InboxHandler<never>;
    this.inboxState.autoAck = (options.ack ?? 'auto') === 'auto';
    if (this.connections[0] instanceof SseConnection) this.requestReopen();
  }

  /** Acknowledges an inbox log up to and including `seq` (WebSocket `ack`, else `POST /v1/ack`). */
  async ack(channel: '$app' | '$device', seq: number, epoch?: string): Promise<void> {
    const connection = this.connections[0];
    if (connection instanceof WebSocketConnection && connection.isOpen) {
      await connection.request('ack', epoch ? { channel, seq, epoch } : { channel, seq });
      return;
    }
    const token = this.currentToken ?? (await this.fetchToken());
    await httpRequest(this.fetchImpl(), {
      method: 'POST',
      url: new URL('/v1/ack', this.options.url).toString(),
      headers: { authorization: `Bearer ${token}` },
      body: epoch ? { channel, seq, epoch } : { channel, seq },
      timeoutMs: this.options.requestTimeoutMs,
    });
  }

  /** Publishes over the WebSocket (needs a token whose `publish` patterns allow the channel). */
  async publish(channel: string, data: unknown, options: { id?: string } = {}): Promise<PublishReply> {
    const connection = await this.webSocketFor('publish');
    const frame = await connection.request('publish', options.id === undefined ? { channel, data } : { channel, data, id: options.id });
    return frame.body as PublishReply;
  }

  /** Reads retained messages over the WebSocket (needs subscribe permission). */
  async history(channel: string, options: { since?: number; limit?: number } = {}): Promise<HistoryReply> {
    const connection = await this.webSocketFor('history');
    const frame = await connection.request('history', { channel, ...options });
    return frame.body as HistoryReply;
  }

  private async webSocketFor(what: string): Promise<WebSocketConnection> {
    await this.whenConnected(this.options.requestTimeoutMs);
    const connection = this.connections[0];
    if (!(connection instanceof WebSocketConnection)) {
      throw new HeraldError('not_supported', `${what} needs the WebSocket transport; this client is on SSE`);
    }
    return connection;
  }

  private whenConnected(timeoutMs: number): Promise<void> {
    if (this.closed) return Promise.reject(new HeraldError('not_connected', 'the client is closed'));
    if (this.connections.length > 0) return Promise.resolve();
    if (!this.running) return Promise.reject(new HeraldError('not_connected', 'call connect() first'));
    return new Promise((resolve, reject) => {
      const done = () => {
        clearTimeout(timer);
        this.connectedWaiters.delete(done);
        if (this.closed) reject(new HeraldError('not_connected', 'the client is closed'));
        else resolve();
      };
      const timer = Number.isFinite(timeoutMs)
        ? setTimeout(() => {
            this.connectedWaiters.delete(done);
            reject(new HeraldError('not_connected', `not connected within ${timeoutMs} ms`));
          }, timeoutMs)
        : undefined;
      this.connectedWaiters.add(done);
    });
  }

  private fetchImpl(): FetchLike {
    const f = this.options.fetch ?? globalThis.fetch;
    if (!f) throw new HeraldError('not_supported', 'no fetch: pass options.fetch');
    return f.bind(globalThis);
  }

  private async fetchToken(): Promise<string | undefined> {
    const source = this.options.token;
    if (source === undefined) return undefined;
    if (typeof source === 'string') return source;
    let token: unknown;
    try {
      token = await source();
    } catch (e) {
      throw new HeraldError('token_unavailable', `the token callback failed: ${(e as Error)?.message ?? String(e)}`, { cause: e });
    }
    if (typeof token !== 'string') throw new HeraldError('token_unavailable', 'the token callback did not return a string');
    return token;
  }

  private requestReopen(): void {
    if (this.reopenRequested) return;
    this.reopenRequested = true;
    for (const c of this.connections) c.close();
  }

  // ---- the connection loop ----

  private async loop(): Promise<void> {
    let immediate = false;
    while (!this.closed) {
      let info: CloseInfo | undefined;
      let wasConnected = false;
      try {
        const ended = await this.connectOnce();
        wasConnected = true;
        this.backoff.reset();
        info = await ended;
      } catch (e) {
        if (e instanceof RetryNow) {
          immediate = true;
          continue;
        }
        const error = e instanceof HeraldError ? e : new HeraldError('network', String(e), { cause: e });
        if (this.closed) break;
        if (error.code === 'token_expired' && !immediate) {
          immediate = true; // one quick retry with a fresh token
        } else {
          immediate = false;
          this.emit('error', error);
          if (this.isFatal(error)) {
            this.emit('disconnected', { code: error.code, reason: error.message, willReconnect: false });
            this.close();
            break;
          }
        }
      }
      this.connections = [];
      if (info) {
        const reopen = this.reopenRequested && info.code === 'closed';
        this.reopenRequested = false;
        if (reopen && !this.closed) {
          immediate = true;
        } else {
          immediate = info.code === 'token_expired';
          if (info.code === 'revoked') {
            // Access was revoked on purpose: reconnecting (even with a fresh token from the
            // callback) would undo an `all`/`sub`/`device` revocation, so the client stops.
            const event: DisconnectedEvent = { code: info.code, reason: info.message, willReconnect: false };
            if (info.closeCode !== undefined) event.closeCode = info.closeCode;
            this.close();
            this.emit('disconnected', event);
            break;
          }
          if (wasConnected) {
            const event: DisconnectedEvent = { code: info.code, reason: info.message, willReconnect: !this.closed };
            if (info.closeCode !== undefined) event.closeCode = info.closeCode;
            this.emit('disconnected', event);
          }
        }
      }
      if (this.closed) break;
      const delay = immediate ? 0 : this.backoff.next();
      if (delay > 0) await sleep(delay, this.wakeUp);
    }
    for (const waiter of [...this.connectedWaiters]) waiter();
  }

  /** A static token the server refuses will never work: stop instead of looping. */
  private isFatal(error: HeraldError): boolean {
    if (typeof this.options.token === 'function') return false;
    return error.code === 'unauthorized' || error.code === 'forbidden' || error.code === 'token_expired';
  }

  /** Opens a connection; resolves (once connected) with a promise of how it ends. */
  private async connectOnce(): Promise<Promise<CloseInfo>> {
    const token = await this.fetchToken();
    this.currentToken = token;
    // Closed while the token was fetched or the WebSocket failed: open nothing more (an SSE
    // stream subscribes as it opens, so a presence channel would see a join and a leave).
    const closed = () => new HeraldError('not_connected', 'the client is closed');
    if (this.closed) throw closed();
    if (this.options.transport !== 'sse') {
      try {
        return await this.startWebSocket(token);
      } catch (e) {
        const opened = (e as { opened?: boolean }).opened;
        if (this.options.transport === 'websocket' || opened) throw e;
      }
      if (this.closed) throw closed();
    }
    return this.startSse(token);
  }

  private makeSink(onClosed: (info: CloseInfo) => void): ConnectionSink {
    return {
      subscribed: (reply) => this.delivery.onSubscribed(reply),
      message: (message) => this.delivery.onMessage(message),
      presence: (frame) => this.delivery.onPresence(frame),
      error: (error) => this.emit('error', error),
      closed: onClosed,
    };
  }

  private async startWebSocket(token: string | undefined): Promise<Promise<CloseInfo>> {
    const WebSocketImpl = this.options.WebSocket ?? (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
    if (!WebSocketImpl) throw new HeraldError('not_supported', 'no WebSocket: pass options.WebSocket (in Node 20, the `ws` package)');
    const url = new URL('/v1/ws', this.options.url);
    url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
    let resolveEnded!: (info: CloseInfo) => void;
    const ended = new Promise<CloseInfo>((resolve) => (resolveEnded = resolve));
    const connection = await WebSocketConnection.open(WebSocketImpl, url.toString(), this.makeSink(resolveEnded), {
      openTimeoutMs: this.options.requestTimeoutMs,
      requestTimeoutMs: this.options.requestTimeoutMs,
      pingIntervalMs: this.options.pingIntervalMs,
      batches: !this.batchesTooBig,
      onBatchTooBig: () => {
        this.batchesTooBig = true;
      },
    });
    let sub: string | undefined;
    let expires: number | undefined;
    try {
      this.inboxState.onConnect();
      const reply = await connection.request('connect', token ? { token } : {});
      ({ sub, expires } = reply.body as ConnectReply);
    } catch (e) {
      connection.close();
      throw Object.assign(e as HeraldError, { opened: true });
    }
    if (this.closed) {
      connection.close();
      return ended;
    }
    this.connections = [connection];
    this.emit('connected', sub === undefined ? { transport: 'websocket' } : { transport: 'websocket', sub });
    for (const waiter of [...this.connectedWaiters]) waiter();
    for (const s of this.subs.values()) this.sendSubscribe(connection, s);
    this.scheduleRefresh(connection, expires);
    return ended;
  }

  /** Plans the replacement of the WebSocket's token `refreshBeforeExpiryMs` before `expires`. */
  private scheduleRefresh(connection: WebSocketConnection, expires: number | undefined): void {
    if (expires === undefined || typeof this.options.token !== 'function' || this.options.refreshBeforeExpiryMs <= 0) return;
    const left = expires * 1000 - Date.now();
    // Short-lived tokens are replaced at half their remaining life at the earliest (no busy loop).
    const delay = Math.max(0, left - this.options.refreshBeforeExpiryMs, left / 2);
    const timer = setTimeout(() => void this.refreshToken(connection, expires), delay);
    connection.onClose(() => clearTimeout(timer));
  }

  private async refreshToken(connection: WebSocketConnection, oldExpires: number): Promise<void> {
    if (this.closed || this.connections[0] !== connection || !connection.isOpen) return;
    try {
      const token = await this.fetchToken();
      const frame = await connection.request('connect', token ? { token } : {});
      this.currentToken = token;
      const reply = frame.body as ConnectReply;
      for (const channel of reply.unsubscribed ?? []) {
        const s = this.subs.get(channel);
        if (s) this.delivery.refuse(s, new HeraldError('forbidden', `the refreshed token no longer allows ${JSON.stringify(channel)}`));
      }
      this.emit('token_refreshed', reply.expires === undefined ? {} : { expires: reply.expires });
      // A callback that gives no later expiry is not asked again: the server's expiry ends it.
      if (reply.expires !== undefined && reply.expires > oldExpires) this.scheduleRefresh(connection, reply.expires);
    } catch (e) {
      if (this.closed || !connection.isOpen) return;
      this.emit('error', e instanceof HeraldError ? e : new HeraldError('network', String(e), { cause: e }));
    }
  }

  private sendSubscribe(connection: WebSocketConnection, s: Subscription): void {
    const since = s.cursor ? { ...s.cursor } : undefined;
    const body = {
      channel: s.channel,
      ...(since ? { since } : {}),
      ...(s.last === undefined ? {} : { last: s.last }),
      ...(s.presence.presence ? { presence: true } : {}),
      ...(s.presence.presence && s.presence.member ? { member: s.presence.member } : {}),
    };
    // Subscribes sent in the same tick (a reconnect's, or several `subscribe` calls) go in batches.
    connection
      .request('subscribe', body, (frame) => {
        if (this.subs.get(s.channel) === s) this.delivery.onSubscribeReply(s, frame.body as SubscribeReply, since);
        // Unsubscribed while the subscribe was in flight: undo it on the server too.
        else if (!this.subs.has(s.channel)) connection.request('unsubscribe', { channel: s.channel }).catch(() => {});
      }, true)
      .catch((e: HeraldError) => {
        if (isServerErrorCode(e.code)) this.delivery.refuse(s, e);
        // network/timeout: the connection is going away; the next one resubscribes
      });
  }

  // ---- SSE ----

  private async startSse(token: string | undefined): Promise<Promise<CloseInfo>> {
    const confirmed = [...this.subs.values()].filter((s) => s.everSubscribed);
    const fresh = [...this.subs.values()].filter((s) => !s.everSubscribed);
    const trying = this.sseOneAtATime ? fresh.slice(0, 1) : fresh;
    const channels = [...confirmed, ...trying];
    const wantsInbox = this.inboxState.handler !== undefined && token !== undefined && readTokenClaims(token)?.device !== undefined;
    const streams = planSseStreams(this.options.url, channels, wantsInbox ? { since: this.inboxState.sinceString() } : undefined);
    this.delivery.streamSince = new Map(channels.filter((s) => s.cursor).map((s) => [s.channel, { ...(s.cursor as Position) }]));
    let resolveEnded!: (info: CloseInfo) => void;
    const ended = new Promise<CloseInfo>((resolve) => (resolveEnded = resolve));
    const opened: SseConnection[] = [];
    let finished = false;
    const onClosed = (info: CloseInfo) => {
      if (finished) return;
      finished = true;
      for (const c of opened) c.close();
      resolveEnded(info);
    };
    if (streams.length === 0) {
      // Nothing to receive yet: stay "connected" until a subscribe reopens.
      const idle = { kind: 'sse' as const, close: () => onClosed({ code: 'closed', message: 'closed by the client' }) };
      this.connections = [idle as unknown as SseConnection];
    } else {
      this.inboxState.onConnect();
      for (const stream of streams) {
        try {
          opened.push(
            await SseConnection.open(this.fetchImpl(), stream.url.toString(), token, this.makeSink(onClosed), {
              openTimeoutMs: this.options.requestTimeoutMs,
              idleTimeoutMs: this.options.sseIdleTimeoutMs,
            }),
          );
        } catch (e) {
          finished = true;
          for (const c of opened) c.close();
          throw this.sseOpenFailed(e as HeraldError, stream.channels, confirmed);
        }
      }
      this.sseOneAtATime = this.sseOneAtATime && fresh.length > trying.length;
      this.connections = opened;
    }
    if (this.closed) {
      for (const c of this.connections) c.close();
      return ended;
    }
    this.emit('connected', { transport: 'sse' });
    for (const waiter of [...this.connectedWaiters]) waiter();
    return ended;
  }

  /** A refused SSE stream: find the refused channel when a channel is to blame. */
  private sseOpenFailed(error: HeraldError, channels: Subscription[], confirmed: Subscription[]): Error {
    const channelError = error.code === 'forbidden' || error.code === 'channel_invalid' || error.code === 'too_many_subscriptions';
    const fresh = channels.filter((s) => !confirmed.includes(s));
    if (!channelError || fresh.length === 0) return error;
    if (fresh.length === 1 && fresh[0]) {
      this.delivery.refuse(fresh[0], error);
    } else {
      this.sseOneAtATime = true;
    }
    // Not a connection failure: try again at once without the refused channel.
    return new RetryNow();
  }
}
