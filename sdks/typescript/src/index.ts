/**
 * herald-push-client: the subscriber client (`HeraldClient`), the publisher client
 * (`HeraldPublisher`), and the protocol pieces they are built from (cursor strings, frames, tokens,
 * errors).
 */

export { HeraldClient, Subscription } from './client.js';
export type {
  ClientEvents,
  ClientOptions,
  ConnectedEvent,
  DisconnectedEvent,
  MessageHandler,
  PresenceEvent,
  PresenceHandler,
  SubscribeOptions,
  TokenSource,
  TransportChoice,
  UnrecoveredEvent,
} from './client.js';
export type { InboxHandler, InboxMessage, InboxOptions } from './inbox.js';
export { HeraldPublisher } from './publisher.js';
export type { AnswerOf, BodyOf, PollAnswer, PublisherOptions, QueryOf, RevokeRequest, Schemas } from './publisher.js';
export { HeraldError, NotReadyError, SERVER_ERROR_STATUS, errorFromBody, isServerErrorCode } from './errors.js';
export type { ClientErrorCode, FailingCheck, HeraldErrorCode, Readiness, ServerErrorCode } from './errors.js';
export { decodeCursor, decodeInboxCursor, encodeCursor, encodeInboxCursor } from './cursor.js';
export type { InboxCursor, Position } from './cursor.js';
export { RawJson, checkMessage, decodeServerFrame, encodeCommand } from './protocol.js';
export type {
  AckReply,
  CommandName,
  Commands,
  ConnectReply,
  Disconnect,
  HistoryReply,
  Message,
  PresenceFrame,
  PresenceMember,
  PublishReply,
  PushEnvelope,
  ServerFrame,
  SubscribeReply,
} from './protocol.js';
export { mintToken, readTokenClaims } from './token.js';
export type { TokenClaims } from './token.js';
export { SseParser } from './transport/sse-parser.js';
export type { SseEvent } from './transport/sse-parser.js';
export type { WebSocketConstructor, WebSocketLike } from './transport/types.js';
export { Backoff } from './backoff.js';
export type { BackoffOptions } from './backoff.js';
export type { components, operations, paths } from './generated/openapi.js';
