package dev.herald.client;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonPrimitive;
import dev.herald.client.internal.Json;
import java.util.Map;

/**
 * One message of a channel, or of a device's inbox (channel {@code $app} or {@code $device}, id =
 * the push id, data = the push envelope). {@link #dataJson()} is the publisher's JSON text byte
 * for byte; {@link #data()} the same parsed.
 */
public final class Message {
  /** The channel name of a device's broadcast inbox log. */
  public static final String APP_LOG = "$app";
  /** The channel name of a device's own inbox log. */
  public static final String DEVICE_LOG = "$device";

  private final String channel;
  private final long seq;
  private final String epoch;
  private final String id;
  private final long time;
  private final String dataJson;

  public Message(String channel, long seq, String epoch, String id, long time, String dataJson) {
    this.channel = channel;
    this.seq = seq;
    this.epoch = epoch;
    this.id = id;
    this.time = time;
    this.dataJson = dataJson;
  }

  /** Reads a message object (its exact JSON text). */
  static Message fromJson(String objectText) {
    JsonElement parsed = Json.parseStrict(objectText);
    if (!parsed.isJsonObject()) {
      throw protocol("a message is not a JSON object");
    }
    JsonObject o = parsed.getAsJsonObject();
    Map<String, String> raw = Json.members(objectText);
    if (!raw.containsKey("data")) {
      throw protocol("a message has no data");
    }
    return new Message(
        string(o, "channel"), unsigned(o, "seq"), string(o, "epoch"), string(o, "id"),
        unsigned(o, "time"), raw.get("data"));
  }

  static String string(JsonObject o, String field) {
    JsonElement e = o.get(field);
    if (e == null || !e.isJsonPrimitive() || !e.getAsJsonPrimitive().isString()) {
      throw protocol("field \"" + field + "\" is missing or not a string");
    }
    return e.getAsString();
  }

  static long unsigned(JsonObject o, String field) {
    JsonElement e = o.get(field);
    if (e == null || !e.isJsonPrimitive() || !e.getAsJsonPrimitive().isNumber()) {
      throw protocol("field \"" + field + "\" is missing or not a number");
    }
    Long value = CursorStrings.parseSeq(((JsonPrimitive) e).getAsNumber().toString());
    if (value == null) {
      throw protocol("field \"" + field + "\" is not an unsigned integer");
    }
    return value;
  }

  static HeraldException protocol(String message) {
    return new HeraldException(ErrorCode.BAD_REQUEST.wire(), message, 0, -1, null);
  }

  public String channel() {
    return channel;
  }

  /** The message's seq in its channel (unsigned). */
  public long seq() {
    return seq;
  }

  public String epoch() {
    return epoch;
  }

  /** The publisher's idempotency key, or {@code <epoch>-<seq>}; the push id for inbox messages. */
  public String id() {
    return id;
  }

  /** When the server stored it, milliseconds since the Unix epoch. */
  public long time() {
    return time;
  }

  /** The data as the publisher sent it, byte for byte. */
  public String dataJson() {
    return dataJson;
  }

  /** The data parsed. */
  public JsonElement data() {
    return Json.parseStrict(dataJson);
  }

  /** The data as a string, when the publisher sent a JSON string (Meteor's {@code ADDMESSAGE} does). */
  public String dataAsString() {
    JsonElement d = data();
    return d.isJsonPrimitive() && d.getAsJsonPrimitive().isString() ? d.getAsString() : dataJson;
  }

  /** This message's cursor: resuming after it skips it. */
  public Cursor cursor() {
    return new Cursor(epoch, seq);
  }

  /** Whether this is a device inbox message ({@code $app} or {@code $device}). */
  public boolean isInbox() {
    return APP_LOG.equals(channel) || DEVICE_LOG.equals(channel);
  }

  /**
   * For an inbox message, the push envelope's {@code data} as its exact JSON text, or {@code null}
   * when the push had none.
   */
  public String pushDataJson() {
    return Json.members(dataJson).get("data");
  }

  /** For an inbox message, the push envelope ({@code data}, {@code notification}, {@code expires}, ...). */
  public JsonObject envelope() {
    return data().getAsJsonObject();
  }

  @Override
  public String toString() {
    return "Message[" + channel + " " + epoch + ":" + Long.toUnsignedString(seq) + " id=" + id + "]";
  }
}
