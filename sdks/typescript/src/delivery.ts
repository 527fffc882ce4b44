/**
 * What the handlers see: the subscriptions and their cursors, the subscribe outcomes (`ready`,
 * `unrecovered`), dropping what was already handed over (so a resume never repeats a message),
 * the device inbox, and the one queue that runs handlers one at a time, in arrival order, each
 * awaited, with automatic inbox acks after the handler.
 */

import type { ClientEvents } from './client-types.js';
import type { Position } from './cursor.js';
import { HeraldError } from './errors.js';
import { InboxState, type InboxMessage } from './inbox.js';
import type { Message, PresenceFrame, PresenceMember, PushEnvelope, SubscribeReply } from './protocol.js';
import type { PresenceEvent } from './client-types.js';
import type { Subscription } from './subscription.js';

/** What the delivery needs from the client that owns it. */
export interface DeliveryHost {
  emit<K extends keyof ClientEvents>(name: K, event: ClientEvents[K]): void;
  ack(channel: '$app' | '$device', seq: number, epoch?: string): Promise<void>;
  /** A subscription was confirmed by the server. */
  subscribed(): void;
}

export class Delivery {
  readonly subs = new Map<string, Subscription>();
  readonly inbox = new InboxState();
  /** The positions sent as `since` on the current SSE stream, by channel (SSE replies carry no request). */
  streamSince = new Map<string, Position>();
  private chain: Promise<void> = Promise.resolve();

  constructor(private readonly host: DeliveryHost) {}

  /** A subscription the server refused: dropped, `ready` rejected, an `error` event. */
  refuse(s: Subscription, e: HeraldError): void {
    if (this.subs.get(s.channel) === s) this.subs.delete(s.channel);
    const error = new HeraldError(e.code, e.message, { channel: s.channel, ...(e.status === undefined ? {} : { status: e.status }) });
    s.settled = true;
    s.rejectReady(error);
    this.host.emit('error', error);
  }

  onSubscribeReply(s: Subscription, reply: SubscribeReply, since: Position | undefined): void {
    if (since && !reply.recovered) this.host.emit('unrecovered', { channel: s.channel, since, reply });
    if (!since || !reply.recovered) {
      // Live messages start after reply.seq; with `last`, the newest message comes first.
      const wantsLast = s.last === true && !reply.recovered && reply.seq > 0;
      s.cursor = { epoch: reply.epoch, seq: wantsLast ? reply.seq - 1 : reply.seq };
    }
    s.everSubscribed = true;
    this.host.subscribed();
    if (!s.settled) {
      s.settled = true;
      s.resolveReady(reply);
    }
  }

  onSubscribed(reply: SubscribeReply): void {
    if (reply.channel === '$app' || reply.channel === '$device') {
      this.inbox.onSubscribed(reply);
      return;
    }
    const s = this.subs.get(reply.channel);
    if (s) this.onSubscribeReply(s, reply, this.streamSince.get(reply.channel));
  }

  onMessage(message: Message): void {
    if (message.channel === '$app' || message.channel === '$device') {
      const accepted = this.inbox.accept(message);
      if (accepted) this.dispatch(() => this.deliverInbox(accepted));
      return;
    }
    const s = this.subs.get(message.channel);
    if (!s) return;
    const cursor = s.cursor;
    if (cursor && (cursor.epoch === message.epoch || cursor.epoch === '') && message.seq <= cursor.seq) return;
    s.cursor = { epoch: message.epoch, seq: message.seq };
    this.dispatch(async () => {
      if (this.subs.get(s.channel) !== s) return;
      try {
        await s.handler(message as never);
      } catch (e) {
        this.host.emit('error', new HeraldError('handler_failed', `the handler of ${JSON.stringify(s.channel)} failed: ${(e as Error)?.message ?? String(e)}`, { channel: s.channel, cause: e }));
      }
    });
  }

  /**
   * A presence frame: applied to the channel's member list (a `members` frame replaces it), then
   * told to the subscription's `onPresence` and the `presence` event. Ignored for a channel that
   * did not ask (an SSE stream asks for every channel it names).
   */
  onPresence(frame: PresenceFrame): void {
    const s = this.subs.get(frame.channel);
    if (!s || !s.presence.presence) return;
    let event: PresenceEvent;
    if (frame.event === 'members') {
      s.memberMap = new Map((frame.members ?? []).map((m) => [m.user, { user: m.user, data: m.data ?? {} }]));
      event = { channel: s.channel, event: 'members', members: [] };
    } else if (frame.event === 'join' && typeof frame.user === 'string') {
      const member: PresenceMember = { user: frame.user, data: frame.data ?? {} };
      s.memberMap ??= new Map();
      s.memberMap.delete(member.user);
      s.memberMap.set(member.user, member);
      event = { channel: s.channel, event: 'join', member, user: member.user, members: [] };
    } else if (frame.event === 'leave' && typeof frame.user === 'string') {
      s.memberMap?.delete(frame.user);
      event = { channel: s.channel, event: 'leave', user: frame.user, members: [] };
    } else {
      return;
    }
    event.members = s.members ?? [];
    try {
      s.presence.onPresence?.(event);
    } catch (e) {
      this.host.emit('error', new HeraldError('handler_failed', `the presence handler of ${JSON.stringify(s.channel)} failed: ${(e as Error)?.message ?? String(e)}`, { channel: s.channel, cause: e }));
    }
    this.host.emit('presence', event);
  }

  private async deliverInbox(message: Message<PushEnvelope>): Promise<void> {
    const handler = this.inbox.handler;
    if (!handler) return;
    const channel = message.channel as '$app' | '$device';
    const inboxMessage: InboxMessage = { ...message, channel, ack: () => this.host.ack(channel, message.seq, message.epoch) };
    try {
      await handler(inboxMessage as never);
    } catch (e) {
      this.host.emit('error', new HeraldError('handler_failed', `the inbox handler failed on push ${message.id}: ${(e as Error)?.message ?? String(e)}`, { channel, cause: e }));
      return;
    }
    if (this.inbox.autoAck) {
      try {
        await inboxMessage.ack();
      } catch (e) {
        this.host.emit('error', e instanceof HeraldError ? e : new HeraldError('network', String(e), { cause: e }));
      }
    }
  }

  /** Runs `task` after every task dispatched before it (handlers see one message at a time). */
  private dispatch(task: () => Promise<void>): void {
    this.chain = this.chain.then(task, task);
  }
}
