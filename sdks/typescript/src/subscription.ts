/** A channel subscription: its handler, its cursor (the last message received) and its `ready` promise. */

import type { Position } from './cursor.js';
import type { HeraldError } from './errors.js';
import type { PresenceMember, SubscribeReply } from './protocol.js';
import type { MessageHandler, SubscribeOptions } from './client-types.js';

/** One channel subscription. */
export class Subscription {
  /** Resolves with the first subscribe reply; rejects with the server's error if refused. */
  readonly ready: Promise<SubscribeReply>;
  /** @internal */ resolveReady!: (reply: SubscribeReply) => void;
  /** @internal */ rejectReady!: (error: HeraldError) => void;
  /** @internal */ cursor: Position | null;
  /** @internal */ everSubscribed = false;
  /** @internal */ settled = false;
  /** @internal The members by user id, in the order they joined; null until first listed. */
  memberMap: Map<string, PresenceMember> | null = null;

  /** @internal */
  constructor(
    readonly channel: string,
    /** @internal */ readonly handler: MessageHandler<never>,
    /** @internal */ readonly last: boolean | undefined,
    since: Position | undefined,
    private readonly client: { unsubscribe(channel: string): Promise<void> },
    /** @internal The presence options (`presence`, `member`, `onPresence`). */
    readonly presence: Pick<SubscribeOptions, 'presence' | 'member' | 'onPresence'> = {},
  ) {
    this.cursor = since ? { ...since } : null;
    this.ready = new Promise<SubscribeReply>((resolve, reject) => {
      this.resolveReady = resolve;
      this.rejectReady = reject;
    });
    this.ready.catch(() => {
      /* reported through the `error` event too; awaiting `ready` is optional */
    });
  }

  /** The position of the last message received on this channel (persist it to resume later). */
  get position(): Position | null {
    return this.cursor ? { ...this.cursor } : null;
  }

  /**
   * With `presence`: the channel's members, in the order they joined, as the last presence
   * events left them (the previous connection's until a resubscribe lists them again); `null`
   * before they were first listed, or without `presence`.
   */
  get members(): PresenceMember[] | null {
    return this.memberMap ? [...this.memberMap.values()] : null;
  }

  unsubscribe(): Promise<void> {
    return this.client.unsubscribe(this.channel);
  }
}
