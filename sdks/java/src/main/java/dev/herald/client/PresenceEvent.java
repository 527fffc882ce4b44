package dev.herald.client;

import dev.herald.client.model.ChannelPresence;
import java.util.List;

/**
 * A presence channel's change, told to {@link HeraldObserver#onPresence} for a channel joined with
 * {@link HeraldClient#joinPresenceChannel}: its members (first, on every (re)subscribe), a join or a
 * leave (docs/protocol.md section 10). Already applied: {@link #members()} is the channel's list
 * after it. Presence is live state, never resumed: after a reconnect the members come again and
 * replace the list.
 */
public final class PresenceEvent {
  /** What happened. */
  public enum Kind {
    /** The whole list (sent first on every subscribe). */
    MEMBERS,
    /** A user joined (its first subscription to the channel). */
    JOIN,
    /** A user left (its last subscription ended). */
    LEAVE
  }

  private final String channel;
  private final Kind kind;
  private final String user;
  private final ChannelPresence.Member member;
  private final List<ChannelPresence.Member> members;

  PresenceEvent(String channel, Kind kind, String user, ChannelPresence.Member member, List<ChannelPresence.Member> members) {
    this.channel = channel;
    this.kind = kind;
    this.user = user;
    this.member = member;
    this.members = members;
  }

  public String channel() {
    return channel;
  }

  public Kind kind() {
    return kind;
  }

  /** {@link Kind#JOIN} and {@link Kind#LEAVE}: the user id; null for {@link Kind#MEMBERS}. */
  public String user() {
    return user;
  }

  /** {@link Kind#JOIN}: who joined, with its data; null otherwise. */
  public ChannelPresence.Member member() {
    return member;
  }

  /** The channel's members after this event, in the order they joined (unmodifiable). */
  public List<ChannelPresence.Member> members() {
    return members;
  }

  @Override
  public String toString() {
    return "PresenceEvent{" + channel + " " + kind + (user == null ? "" : " " + user) + "}";
  }
}
