/**
 * The device inbox on the client side: the handler and ack mode, and the position received in
 * each log (`$app`, `$device`), so that a reconnect that replays from the server's acknowledged
 * cursor does not hand the handler a push it already had on this client.
 */

import type { Position } from './cursor.js';
import type { Message, PushEnvelope, SubscribeReply } from './protocol.js';

/** An inbox push: a message of `$app` or `$device` whose data is the push envelope. */
export interface InboxMessage<T = unknown> extends Message<PushEnvelope<T>> {
  channel: '$app' | '$device';
  /** Acknowledges this log up to and including this push. */
  ack(): Promise<void>;
}

export type InboxHandler<T = unknown> = (message: InboxMessage<T>) => void | Promise<void>;

export interface InboxOptions {
  /** `auto` (default): ack after the handler returns without error; `manual`: call `message.ack()`. */
  ack?: 'auto' | 'manual';
}

type Log = '$app' | '$device';

export class InboxState {
  handler: InboxHandler<never> | undefined;
  autoAck = true;
  /** The last push handed to the handler, per log. */
  private readonly received = new Map<Log, Position>();

  /** A new connection: nothing to forget (positions are kept across connections). */
  onConnect(): void {}

  onSubscribed(reply: SubscribeReply): void {
    const had = this.received.get(reply.channel as Log);
    // Another epoch: the log was reset, positions in the old one mean nothing.
    if (had && had.epoch !== reply.epoch && reply.epoch !== '') this.received.delete(reply.channel as Log);
  }

  /** The message if it is new to this client (and a handler wants it), else `undefined`. */
  accept(message: Message): Message<PushEnvelope> | undefined {
    if (!this.handler) return undefined;
    const log = message.channel as Log;
    const had = this.received.get(log);
    if (had && had.epoch === message.epoch && message.seq <= had.seq) return undefined;
    this.received.set(log, { epoch: message.epoch, seq: message.seq });
    return message as Message<PushEnvelope>;
  }

  /** The SSE `since` for the inbox stream: the positions received, `$app` first. */
  sinceString(): string | undefined {
    const app = this.received.get('$app');
    const device = this.received.get('$device');
    if (!app && !device) return undefined;
    if (!app) return undefined; // a `$device` position alone cannot be written; the server's acked cursor applies
    return device ? `${app.epoch}:${app.seq},${device.epoch}:${device.seq}` : `${app.epoch}:${app.seq}`;
  }
}
