package dev.herald.client.model;

import com.google.gson.JsonObject;
import java.util.List;

/**
 * A presence channel's members, in the order they joined ({@code GET /v1/channels/{name}/presence};
 * docs/protocol.md section 10).
 */
public final class ChannelPresence {
  public String channel;
  public List<Member> members;
  public long count;

  /** One member: the user id (the client token's {@code sub}) and its data (a JSON object). */
  public static final class Member {
    public String user;
    /** The token's {@code user_info} claim, else the client's subscribe {@code member}, else {@code {}}. */
    public JsonObject data;
  }
}
