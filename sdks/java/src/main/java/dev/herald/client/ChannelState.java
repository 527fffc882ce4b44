package dev.herald.client;

/** One joined channel of a {@link HeraldClient}: its cursor and how to subscribe it next. Guarded by the client's lock. */
final class ChannelState {
  final String name;
  /** Newest messages to replay on the first subscribe (0: none). */
  final int catchUp;
  /** The last message handed to the observers, or the subscription's start; null before the first subscribe. */
  Cursor cursor;
  /** Whether {@link #cursor} is a position the user has reached (so a failed resume is a possible gap). */
  boolean resumable;
  /** The connection this channel was last subscribed on. */
  Connection subscribedOn;

  ChannelState(String name, int catchUp, Cursor since) {
    this.name = name;
    this.catchUp = catchUp;
    this.cursor = since;
    this.resumable = since != null;
  }

  /** Whether {@code message} is at or before the cursor (already handed to the observers). */
  boolean alreadySeen(Message message) {
    if (cursor == null) {
      return false;
    }
    boolean sameEpoch = cursor.epoch().isEmpty() || cursor.epoch().equals(message.epoch());
    return sameEpoch && Long.compareUnsigned(message.seq(), cursor.seq()) <= 0;
  }
}
