/** The subscriber client's options, events and handler types. */

import type { BackoffOptions } from './backoff.js';
import type { Position } from './cursor.js';
import type { HeraldError } from './errors.js';
import type { FetchLike } from './http.js';
import type { Message, PresenceMember, SubscribeReply } from './protocol.js';
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
  /**
   * On a presence channel: receive its members (after every (re)subscribe), then each join and
   * leave, as `presence` events and `onPresence` calls, and keep its member list
   * (`client.members(channel)`).
   */
  presence?: boolean;
  /**
   * On a presence channel: this client's member data (a JSON object), used only when its token
   * has no `user_info` claim; supplied by the client, so nobody verifies it. Over SSE one stream
   * carries every channel, so the first subscription's `member` is the one sent.
   */
  member?: Record<string, unknown>;
  /** With `presence`: called with each of the channel's presence events. */
  onPresence?: PresenceHandler;
}

/**
 * A presence channel's change (docs/protocol.md section 10), already applied to the channel's
 * member list. Presence is live state, never resumed: after a reconnect `members` comes again.
 */
export interface PresenceEvent {
  channel: string;
  /** `members`: the whole list (first, on every (re)subscribe); `join`; `leave`. */
  event: 'members' | 'join' | 'leave';
  /** `join`: who joined, with its data. */
  member?: PresenceMember;
  /** `join` and `leave`: the user id. */
  user?: string;
  /** The channel's members after this event, in the order they joined. */
  members: PresenceMember[];
}

export type PresenceHandler = (event: PresenceEvent) => void;

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
  /** A presence channel subscribed with `presence: true` listed its members, or one joined or left. */
  presence: PresenceEvent;
  /** The WebSocket's token was replaced before it expired; `expires` is the new `exp`. */
  token_refreshed: { expires?: number };
}
