/**
 * Which SSE streams to open for a set of subscriptions: one `/v1/sse` request naming the channels
 * (those with a cursor first, since a cursor string can leave positions unset only at its end),
 * and one without `channel` for the device inbox, each with its `since` (and `presence` and
 * `member` when a subscription asked for presence).
 */

import { encodeCursor, type Position } from '../cursor.js';

export interface SseChannel {
  readonly channel: string;
  readonly cursor: Position | null;
  readonly last: boolean | undefined;
  readonly presence?: { presence?: boolean; member?: Record<string, unknown> };
}

export interface SseStreamPlan<C extends SseChannel> {
  url: URL;
  /** The channels this stream names, in cursor order (none for the inbox stream). */
  channels: C[];
}

export function planSseStreams<C extends SseChannel>(
  baseUrl: string,
  channels: readonly C[],
  inbox: { since: string | undefined } | undefined,
): SseStreamPlan<C>[] {
  const streams: SseStreamPlan<C>[] = [];
  if (channels.length > 0) {
    const ordered = [...channels.filter((s) => s.cursor), ...channels.filter((s) => !s.cursor)];
    const url = new URL('/v1/sse', baseUrl);
    for (const s of ordered) url.searchParams.append('channel', s.channel);
    const positions = ordered.flatMap((s) => (s.cursor ? [s.cursor] : []));
    if (positions.length > 0) url.searchParams.set('since', encodeCursor(positions));
    if (ordered.some((s) => s.last && !s.cursor)) url.searchParams.set('last', 'true');
    // `presence` and `member` are the stream's: asked for every channel it names when one asks.
    const present = ordered.filter((s) => s.presence?.presence);
    if (present.length > 0) url.searchParams.set('presence', 'true');
    const member = present.find((s) => s.presence?.member)?.presence?.member;
    if (member) url.searchParams.set('member', JSON.stringify(member));
    streams.push({ url, channels: ordered });
  }
  if (inbox) {
    const url = new URL('/v1/sse', baseUrl);
    if (inbox.since) url.searchParams.set('since', inbox.since);
    streams.push({ url, channels: [] });
  }
  return streams;
}
