package dev.herald.client;

/**
 * What a {@link HeraldClient} tells its observers, on its connection's reader thread, one call at a
 * time (the successor of Deacon's {@code DeaconObserver}). A slow observer slows the reading of the
 * connection: past the server's outbound queue it is disconnected as {@code slow_consumer}, and the
 * client resumes after the last message the observer processed.
 */
public interface HeraldObserver {
  /**
   * A message of a joined channel, or of the device inbox ({@link Message#isInbox()}). Channel
   * messages come once each, in seq order per channel, across reconnects. With automatic acks, an
   * inbox message is acknowledged once this returns normally.
   */
  void onPush(Message message);

  /**
   * An error the server answered (a refused subscribe carries {@link HeraldException#channel()},
   * a refused token {@code unauthorized} or {@code token_expired}, a failed ack its code), or one of
   * this side (an observer that threw, a token supplier that failed).
   */
  default void onError(HeraldException error) {}

  /**
   * A joined channel is subscribed on the current connection: live messages follow {@code position}
   * ({@code recovered}: the subscription resumed exactly from the channel's cursor).
   */
  default void onSubscribed(String channel, Cursor position, boolean recovered) {}

  /** The client is connected again, and has resubscribed every joined channel from its cursor. */
  default void onReconnect() {}

  /**
   * The connection was lost. {@code reason} carries the server's {@code disconnect} code and
   * message ({@code slow_consumer}, {@code token_expired}, {@code shutdown}, {@code revoked}, ...)
   * when it sent one, else {@code code() == null} and the transport error. The client reconnects by
   * itself unless stopped, except after {@code revoked}: access was revoked on purpose, so the
   * client stops ({@link HeraldClient#isRunning()} is false) and does not ask its token supplier
   * again; {@link HeraldClient#start()} starts it afresh (joined channels resume from their cursors).
   */
  default void onDisconnect(HeraldException reason) {}

  /**
   * The server could not resume {@code channel} from {@code previous} (its log was reset, or
   * retention removed messages after the cursor): messages between {@code previous} and {@code now}
   * may be missing. Re-sync the channel from its history if that matters; live messages continue
   * after {@code now}.
   */
  default void onChannelReset(String channel, Cursor previous, Cursor now) {}

  /**
   * A channel joined with {@link HeraldClient#joinPresenceChannel} listed its members (after every
   * (re)subscribe), or a user joined or left it; already applied to {@link HeraldClient#members}.
   */
  default void onPresence(PresenceEvent event) {}
}
