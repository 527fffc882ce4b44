package dev.herald.client;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import dev.herald.client.model.ChannelPresence;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

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
  /** Ask for the channel's presence frames. */
  final boolean presence;
  /** The member data the subscribe gives (a JSON object's text), or null. */
  final String memberJson;
  /**
   * With {@link #presence}: the members by user id in the order they joined; null until the server
   * first listed them. Kept from the last connection until the next one lists them again.
   */
  Map<String, ChannelPresence.Member> members;

  ChannelState(String name, int catchUp, Cursor since) {
    this(name, catchUp, since, false, null);
  }

  ChannelState(String name, int catchUp, Cursor since, boolean presence, String memberJson) {
    this.name = name;
    this.catchUp = catchUp;
    this.cursor = since;
    this.resumable = since != null;
    this.presence = presence;
    this.memberJson = memberJson;
  }

  /** The members as a list (a copy), or null before the first list. */
  List<ChannelPresence.Member> memberList() {
    return members == null ? null : Collections.unmodifiableList(new ArrayList<>(members.values()));
  }

  /**
   * Applies a {@code presence} frame's body to the member list; answers the event to report, or null
   * for a frame it cannot read.
   */
  PresenceEvent applyPresence(JsonObject body) {
    String event = body.has("event") ? body.get("event").getAsString() : "";
    String user = body.has("user") && body.get("user").isJsonPrimitive() ? body.get("user").getAsString() : null;
    switch (event) {
      case "members": {
        Map<String, ChannelPresence.Member> list = new LinkedHashMap<>();
        JsonElement array = body.get("members");
        if (array != null && array.isJsonArray()) {
          for (JsonElement element : array.getAsJsonArray()) {
            if (element.isJsonObject()) {
              ChannelPresence.Member m = member(element.getAsJsonObject());
              if (m != null) {
                list.put(m.user, m);
              }
            }
          }
        }
        members = list;
        return new PresenceEvent(name, PresenceEvent.Kind.MEMBERS, null, null, memberList());
      }
      case "join": {
        ChannelPresence.Member joined = member(body);
        if (joined == null) {
          return null;
        }
        if (members == null) {
          members = new LinkedHashMap<>();
        }
        members.remove(joined.user);
        members.put(joined.user, joined);
        return new PresenceEvent(name, PresenceEvent.Kind.JOIN, joined.user, joined, memberList());
      }
      case "leave":
        if (user == null) {
          return null;
        }
        if (members != null) {
          members.remove(user);
        }
        return new PresenceEvent(name, PresenceEvent.Kind.LEAVE, user, null, memberList());
      default:
        return null;
    }
  }

  private static ChannelPresence.Member member(JsonObject o) {
    JsonElement user = o.get("user");
    if (user == null || !user.isJsonPrimitive()) {
      return null;
    }
    ChannelPresence.Member m = new ChannelPresence.Member();
    m.user = user.getAsString();
    JsonElement data = o.get("data");
    m.data = data != null && data.isJsonObject() ? data.getAsJsonObject() : new JsonObject();
    return m;
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
