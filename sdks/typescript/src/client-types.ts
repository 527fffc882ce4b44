/** The subscriber client's options, events and handler types. */

import type { BackoffOptions } from './backoff.js';
import type { Position } from './cursor.js';
import type { HeraldError } from './errors.js';
import type { FetchLike } from './http.js';
import type { Message, SubscribeReply } from './protocol.js';
import type { WebSocketConstructor } from './transport/types.js';

export type TokenSource = string | (() => string | Promise<string>);
export type TransportChoice = 'auto' | 'websocket' | 'sse';

export interface ClientOptions {
  /** The server's base URL, `http(s)://host:port` (the WebSocket URL is derived from it). */
  url: string;
  /** A client token, or a callback called on every (re)connect and after `token_expired`. */
  token?: TokenSource;
  /** `auto` (default): WebSocket, and SSE when the WebSocket cannot be opened. */
  transport?: TransportChoice;
  /** A WebSocket constructor; default `globalThis.WebSocket` (Node 20: pass the `ws` package's). */
  WebSocket?: WebSocketConstructor;
  /** A fetch implementation; default `globalThis.fetch`. */
  fetch?: FetchLike;
  backoff?: BackoffOptions;
  /** How long a request (connect, subscribe, publish, ack) may wait for its answer; default 10000. */
  requestTimeoutMs?: number;
  /** How often to send a WebSocket `ping` command to notice a dead connection; default 25000, 0 = never. */
  pingIntervalMs?: number;
  /** The longest silence on an SSE stream before reconnecting; default 60000 (the server writes every 50 s at most). */
  sseIdleTimeoutMs?: number;
  /**
   * WebSocket with a token callback: this long before the token's `exp`, ask the callback for a
   * new token and send it in a `connect` (no disconnect). Default 30000; 0 turns it off (the
   * server then closes with `token_expired` and the client reconnects with a fresh token).
   */
  refreshBeforeExpiryMs?: number;
}

export type MessageHandler<T = unknown> = (message: Message<T>) => void | Promise<void>;

export interface SubscribeOptions {
  /** Where to start: resume after this position (e.g. one you persisted). */
  since?: Position;
  /** When not resumed, deliver the channel's newest message first. */
  last?: boolean;
}

export interface ConnectedEvent {
  transport: 'websocket' | 'sse';
  /** The token's `sub`, when the transport reports it (WebSocket). */
  sub?: string;
}

export interface DisconnectedEvent {
  /**
   * The server's `disconnect` code (`slow_consumer`, `shutdown`, `token_expired`, `revoked`, ...),
   * `connection_lost`, or `closed`. After `revoked` the client is closed (`willReconnect: false`).
   */
  code: string;
  reason: string;
  /** The WebSocket close code, on WebSocket. */
  closeCode?: number;
  willReconnect: boolean;
}

/** A cursor given on resubscribe was not resumed: messages between `since` and `reply` may be missing. */
export interface UnrecoveredEvent {
  channel: string;
  since: Position;
  reply: SubscribeReply;
}

export interface ClientEvents {
  connected: ConnectedEvent;
  disconnected: DisconnectedEvent;
  error: HeraldError;
  unrecovered: UnrecoveredEvent;
  /** The WebSocket's token was replaced before it expired; `expires` is the new `exp`. */
  token_refreshed: { expires?: number };
}
