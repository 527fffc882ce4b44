package dev.herald.client;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import dev.herald.client.internal.Json;
import java.util.Arrays;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;

/**
 * A command a client sends over the WebSocket, in its canonical form: {@code id} first (left out
 * when null), then the command key; body fields in the protocol's order, unset ones left out.
 * The static {@code encode...} methods write the frames this SDK sends; {@link #decode} reads one
 * back (checked as the server checks it), keeping a {@code publish}'s data byte for byte.
 */
public final class ClientCommand {
  private static final Set<String> COMMANDS =
      new HashSet<>(Arrays.asList("connect", "subscribe", "unsubscribe", "publish", "history", "ping", "ack"));

  private final Long id;
  private final String name;
  private final JsonObject body;
  private final String rawData;

  private ClientCommand(Long id, String name, JsonObject body, String rawData) {
    this.id = id;
    this.name = name;
    this.body = body;
    this.rawData = rawData;
  }

  public Long id() {
    return id;
  }

  public String name() {
    return name;
  }

  /** The body ({@code {}} for ping, whatever was sent). */
  public JsonObject body() {
    return body;
  }

  /** The canonical text of this command. */
  public String encode() {
    JsonObject b = body;
    switch (name) {
      case "connect":
        return connect(id, opt(b, "token"));
      case "subscribe": {
        JsonObject since = b.has("since") ? b.getAsJsonObject("since") : null;
        Cursor cursor = since == null ? null : new Cursor(opt(since, "epoch"), Message.unsigned(since, "seq"));
        Boolean last = b.has("last") ? b.get("last").getAsBoolean() : null;
        boolean presence = b.has("presence") && b.get("presence").getAsBoolean();
        String member = b.has("member") ? b.get("member").toString() : null;
        return subscribe(
            id, b.get("channel").getAsString(), cursor, since != null && since.has("epoch"), last, presence, member);
      }
      case "unsubscribe":
        return unsubscribe(id, b.get("channel").getAsString());
      case "publish":
        return publish(id, b.get("channel").getAsString(), rawData, opt(b, "id"));
      case "history":
        return history(id, b.get("channel").getAsString(),
            b.has("since") ? Message.unsigned(b, "since") : null,
            b.has("limit") ? b.get("limit").getAsInt() : null);
      case "ack":
        return ack(id, b.get("channel").getAsString(), Message.unsigned(b, "seq"), opt(b, "epoch"));
      default:
        return ping(id);
    }
  }

  private static String opt(JsonObject o, String field) {
    return o.has(field) ? o.get(field).getAsString() : null;
  }

  private static StringBuilder open(Long id, String name) {
    StringBuilder s = new StringBuilder("{");
    if (id != null) {
      s.append("\"id\":").append(Long.toUnsignedString(id)).append(',');
    }
    return s.append('"').append(name).append("\":{");
  }

  static String quote(String s) {
    return Json.GSON.toJson(s);
  }

  /** {@code connect}, with a token or none (anonymous). */
  public static String connect(Long id, String token) {
    StringBuilder s = open(id, "connect");
    if (token != null) {
      s.append("\"token\":").append(quote(token));
    }
    return s.append("}}").toString();
  }

  /**
   * {@code subscribe}: {@code since} resumes after that cursor ({@code withEpoch} false leaves its
   * epoch out: the channel's current epoch); {@code last} null = the namespace default.
   */
  public static String subscribe(Long id, String channel, Cursor since, boolean withEpoch, Boolean last) {
    return subscribe(id, channel, since, withEpoch, last, false, null);
  }

  /**
   * {@code subscribe} with presence: {@code presence} asks for a presence channel's members, joins
   * and leaves; {@code memberJson} (a JSON object's text, or null) is this client's member data,
   * used when its token has no {@code user_info}.
   */
  public static String subscribe(
      Long id, String channel, Cursor since, boolean withEpoch, Boolean last, boolean presence, String memberJson) {
    StringBuilder s = open(id, "subscribe").append("\"channel\":").append(quote(channel));
    if (since != null) {
      s.append(",\"since\":{\"seq\":").append(Long.toUnsignedString(since.seq()));
      if (withEpoch) {
        s.append(",\"epoch\":").append(quote(since.epoch()));
      }
      s.append('}');
    }
    if (last != null) {
      s.append(",\"last\":").append(last.booleanValue());
    }
    if (presence) {
      s.append(",\"presence\":true");
    }
    if (memberJson != null) {
      s.append(",\"member\":").append(memberJson);
    }
    return s.append("}}").toString();
  }

  public static String unsubscribe(Long id, String channel) {
    return open(id, "unsubscribe").append("\"channel\":").append(quote(channel)).append("}}").toString();
  }

  /** {@code publish}: {@code dataJson} is sent as is; {@code messageId} is the optional idempotency key. */
  public static String publish(Long id, String channel, String dataJson, String messageId) {
    StringBuilder s = open(id, "publish").append("\"channel\":").append(quote(channel));
    s.append(",\"data\":").append(dataJson);
    if (messageId != null) {
      s.append(",\"id\":").append(quote(messageId));
    }
    return s.append("}}").toString();
  }

  /** {@code history}: messages after seq {@code since}, at most {@code limit} (nulls: the server's defaults). */
  public static String history(Long id, String channel, Long since, Integer limit) {
    StringBuilder s = open(id, "history").append("\"channel\":").append(quote(channel));
    if (since != null) {
      s.append(",\"since\":").append(Long.toUnsignedString(since));
    }
    if (limit != null) {
      s.append(",\"limit\":").append(limit.intValue());
    }
    return s.append("}}").toString();
  }

  /** {@code ack} of an inbox log ({@code $app} or {@code $device}) up to {@code seq}; epoch optional. */
  public static String ack(Long id, String channel, long seq, String epoch) {
    StringBuilder s = open(id, "ack").append("\"channel\":").append(quote(channel));
    s.append(",\"seq\":").append(Long.toUnsignedString(seq));
    if (epoch != null) {
      s.append(",\"epoch\":").append(quote(epoch));
    }
    return s.append("}}").toString();
  }

  public static String ping(Long id) {
    return open(id, "ping").append("}}").toString();
  }

  /**
   * Reads a command as the server would.
   *
   * @throws HeraldException with the code the server answers ({@code bad_request} or
   *     {@code unknown_command}); {@link #failedId} recovers the id the server's error carries
   */
  public static ClientCommand decode(String wire) {
    JsonElement parsed;
    try {
      parsed = Json.parseStrict(wire);
    } catch (RuntimeException e) {
      throw new CommandError("bad_request", "frame is not JSON", null);
    }
    if (!parsed.isJsonObject()) {
      throw new CommandError("bad_request", "frame is not a JSON object", null);
    }
    JsonObject frame = parsed.getAsJsonObject();
    Long id = null;
    JsonElement idValue = frame.get("id");
    if (idValue != null && !idValue.isJsonNull()) {
      Long n = idValue.isJsonPrimitive() && idValue.getAsJsonPrimitive().isNumber()
          ? CursorStrings.parseSeq(idValue.getAsJsonPrimitive().getAsNumber().toString()) : null;
      if (n == null) {
        throw new CommandError("bad_request", "id must be a non-negative integer", null);
      }
      id = n;
    }
    String name = null;
    for (String k : frame.keySet()) {
      if (!k.equals("id")) {
        if (name != null) {
          throw new CommandError("bad_request", "a frame holds one command", id);
        }
        name = k;
      }
    }
    if (name == null) {
      throw new CommandError("bad_request", "the frame has no command", id);
    }
    if (!COMMANDS.contains(name)) {
      throw new CommandError("unknown_command", "unknown command " + name, id);
    }
    if (name.equals("ping")) {
      return new ClientCommand(id, name, new JsonObject(), null);
    }
    JsonElement bodyValue = frame.get(name);
    if (!bodyValue.isJsonObject()) {
      throw new CommandError("bad_request", "the body must be an object", id);
    }
    JsonObject body = bodyValue.getAsJsonObject();
    String rawData = null;
    try {
      check(name, body);
      if (name.equals("publish")) {
        rawData = Json.members(Json.members(wire).get(name)).get("data");
      }
    } catch (HeraldException e) {
      throw new CommandError("bad_request", e.getMessage(), id);
    }
    return new ClientCommand(id, name, body, rawData);
  }

  private static void check(String name, JsonObject body) {
    switch (name) {
      case "connect":
        allow(body, "token");
        optString(body, "token");
        break;
      case "subscribe":
        allow(body, "channel", "since", "last", "presence", "member");
        Message.string(body, "channel");
        if (body.has("since")) {
          JsonElement since = body.get("since");
          if (!since.isJsonObject()) {
            throw Message.protocol("since must be an object");
          }
          allow(since.getAsJsonObject(), "seq", "epoch");
          Message.unsigned(since.getAsJsonObject(), "seq");
          optString(since.getAsJsonObject(), "epoch");
        }
        if (body.has("last")) {
          ServerFrame.bool(body, "last");
        }
        if (body.has("presence")) {
          ServerFrame.bool(body, "presence");
        }
        if (body.has("member") && !body.get("member").isJsonObject()) {
          throw Message.protocol("member must be an object");
        }
        break;
      case "unsubscribe":
        allow(body, "channel");
        Message.string(body, "channel");
        break;
      case "publish":
        allow(body, "channel", "data", "id");
        Message.string(body, "channel");
        if (!body.has("data")) {
          throw Message.protocol("publish needs data");
        }
        optString(body, "id");
        break;
      case "history":
        allow(body, "channel", "since", "limit");
        Message.string(body, "channel");
        if (body.has("since")) {
          Message.unsigned(body, "since");
        }
        if (body.has("limit")) {
          Message.unsigned(body, "limit");
        }
        break;
      default:
        allow(body, "channel", "seq", "epoch");
        Message.string(body, "channel");
        Message.unsigned(body, "seq");
        optString(body, "epoch");
    }
  }

  private static void allow(JsonObject body, String... fields) {
    Set<String> allowed = new HashSet<>(Arrays.asList(fields));
    for (Map.Entry<String, JsonElement> e : body.entrySet()) {
      if (!allowed.contains(e.getKey())) {
        throw Message.protocol("unknown field " + e.getKey());
      }
    }
  }

  private static void optString(JsonObject body, String field) {
    if (body.has(field)) {
      Message.string(body, field);
    }
  }

  /** The id a decode error carries (the command's id when it was readable), or {@code null}. */
  public static Long failedId(HeraldException e) {
    return e instanceof CommandError ? ((CommandError) e).commandId : null;
  }

  private static final class CommandError extends HeraldException {
    private static final long serialVersionUID = 1L;
    private final Long commandId;

    CommandError(String code, String message, Long commandId) {
      super(code, message, 0, -1, null);
      this.commandId = commandId;
    }
  }
}
