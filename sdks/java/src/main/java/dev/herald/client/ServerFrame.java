package dev.herald.client;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import dev.herald.client.internal.Json;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;

/**
 * One frame the server sends over the WebSocket, decoded and checked: its {@link #kind()}, the
 * command {@link #id()} it answers (or {@code null}), its {@link #body()}, and for {@code message}
 * and {@code history} frames the messages with their data kept byte for byte.
 */
public final class ServerFrame {
  /** What the frame is: a reply to a command, or one of the server's own pushes. */
  public enum Kind {
    CONNECT("connect"),
    SUBSCRIBE("subscribe"),
    UNSUBSCRIBE("unsubscribe"),
    PUBLISH("publish"),
    HISTORY("history"),
    ACK("ack"),
    PONG("pong"),
    ERROR("error"),
    MESSAGE("message"),
    DISCONNECT("disconnect"),
    /** A presence channel's members, joins and leaves (only to a subscription that asked). */
    PRESENCE("presence");

    private final String key;

    Kind(String key) {
      this.key = key;
    }

    /** The frame's key on the wire. */
    public String key() {
      return key;
    }

    static Kind of(String key) {
      for (Kind k : values()) {
        if (k.key.equals(key)) {
          return k;
        }
      }
      return null;
    }
  }

  private final Kind kind;
  private final Long id;
  private final JsonObject body;
  private final List<Message> messages;

  private ServerFrame(Kind kind, Long id, JsonObject body, List<Message> messages) {
    this.kind = kind;
    this.id = id;
    this.body = body;
    this.messages = messages;
  }

  public Kind kind() {
    return kind;
  }

  /** The id of the command this frame answers, or {@code null}. */
  public Long id() {
    return id;
  }

  /** The frame's body object. */
  public JsonObject body() {
    return body;
  }

  /** A {@code message} frame's message. */
  public Message message() {
    return messages.get(0);
  }

  /** A {@code history} reply's messages (empty for other frames). */
  public List<Message> messages() {
    return kind == Kind.HISTORY ? messages : Collections.<Message>emptyList();
  }

  /** A string field of the body. */
  public String string(String field) {
    return Message.string(body, field);
  }

  /** An unsigned integer field of the body. */
  public long unsigned(String field) {
    return Message.unsigned(body, field);
  }

  /**
   * Decodes one text frame.
   *
   * @throws HeraldException code {@code bad_request} when the frame is not a Herald server frame
   */
  public static ServerFrame decode(String wire) {
    JsonElement parsed;
    try {
      parsed = Json.parseStrict(wire);
    } catch (RuntimeException e) {
      throw Message.protocol("a server frame is not JSON: " + e.getMessage());
    }
    if (!parsed.isJsonObject()) {
      throw Message.protocol("a server frame is not a JSON object");
    }
    JsonObject frame = parsed.getAsJsonObject();
    Long id = null;
    JsonElement idValue = frame.get("id");
    if (idValue != null && !idValue.isJsonNull()) {
      id = Message.unsigned(frame, "id");
    }
    String key = null;
    for (String k : frame.keySet()) {
      if (!k.equals("id")) {
        if (key != null) {
          throw Message.protocol("a server frame has two keys: " + key + ", " + k);
        }
        key = k;
      }
    }
    Kind kind = key == null ? null : Kind.of(key);
    if (kind == null) {
      throw Message.protocol("unknown server frame: " + key);
    }
    JsonElement bodyValue = frame.get(key);
    if (!bodyValue.isJsonObject()) {
      throw Message.protocol("the body of " + key + " is not an object");
    }
    JsonObject body = bodyValue.getAsJsonObject();
    List<Message> messages = Collections.emptyList();
    switch (kind) {
      case CONNECT:
        Message.string(body, "sub");
        break;
      case SUBSCRIBE:
        Message.string(body, "channel");
        Message.unsigned(body, "seq");
        Message.string(body, "epoch");
        bool(body, "recovered");
        break;
      case UNSUBSCRIBE:
        Message.string(body, "channel");
        break;
      case PUBLISH:
        Message.string(body, "channel");
        bool(body, "duplicate");
        Message.string(body, "epoch");
        Message.string(body, "id");
        Message.unsigned(body, "seq");
        Message.unsigned(body, "time");
        break;
      case HISTORY:
        Message.string(body, "channel");
        Message.string(body, "epoch");
        Message.unsigned(body, "seq");
        messages = rawMessages(wire, key);
        break;
      case ACK:
        Message.string(body, "channel");
        Message.unsigned(body, "seq");
        break;
      case PONG:
        break;
      case ERROR:
      case DISCONNECT:
        Message.string(body, "code");
        Message.string(body, "message");
        break;
      case MESSAGE:
        messages = Collections.singletonList(Message.fromJson(Json.members(wire).get(key)));
        break;
      case PRESENCE:
        Message.string(body, "channel");
        Message.string(body, "event");
        break;
      default:
        throw Message.protocol("unknown server frame: " + key);
    }
    return new ServerFrame(kind, id, body, messages);
  }

  private static List<Message> rawMessages(String wire, String key) {
    Map<String, String> members = Json.members(Json.members(wire).get(key));
    String array = members.get("messages");
    if (array == null || !array.startsWith("[")) {
      throw Message.protocol("a history reply has no messages array");
    }
    List<Message> out = new ArrayList<>();
    for (String element : Json.elements(array)) {
      out.add(Message.fromJson(element));
    }
    return out;
  }

  static boolean bool(JsonObject o, String field) {
    JsonElement e = o.get(field);
    if (e == null || !e.isJsonPrimitive() || !e.getAsJsonPrimitive().isBoolean()) {
      throw Message.protocol("field \"" + field + "\" is missing or not a boolean");
    }
    return e.getAsBoolean();
  }
}
