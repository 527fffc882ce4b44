/** What a transport connection reports to the client that owns it. */

import type { Message, PresenceFrame, SubscribeReply } from '../protocol.js';
import type { HeraldError } from '../errors.js';

/** Why a connection ended: the server's `disconnect` code, or `connection_lost`/`closed`. */
export interface CloseInfo {
  /** `slow_consumer`, `shutdown`, `token_expired`, `revoked`, `too_large`, `bad_request`, `connection_lost`, or `closed` (the client's own close). */
  code: string;
  /** The server's message, or what the client saw. */
  message: string;
  /** The WebSocket close code, when the transport is a WebSocket. */
  closeCode?: number;
}

export interface ConnectionSink {
  /** A subscribe reply the server sent on its own (the device inbox opening), or an SSE `subscribed`. */
  subscribed(reply: SubscribeReply): void;
  /** A message; `sseId` is the SSE event's cursor string, when read over SSE. */
  message(message: Message, sseId: string | null): void;
  /** A presence channel's members, join or leave (WebSocket `presence` frame, SSE `presence` event). */
  presence(frame: PresenceFrame): void;
  /** An error that belongs to no request the client made (an inbox that could not open). */
  error(error: HeraldError): void;
  /** The connection ended; called once. */
  closed(info: CloseInfo): void;
}

/** The subset of the WHATWG `WebSocket` the SDK uses (the browser's, or the `ws` package's). */
export interface WebSocketLike {
  readonly readyState: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  onopen: ((event: unknown) => void) | null;
  onmessage: ((event: { data: unknown }) => void) | null;
  onclose: ((event: { code: number; reason: string }) => void) | null;
  onerror: ((event: unknown) => void) | null;
}

export type WebSocketConstructor = new (url: string) => WebSocketLike;
