package dev.herald.client.model;

import com.google.gson.JsonArray;
import com.google.gson.JsonNull;
import com.google.gson.JsonObject;
import com.google.gson.JsonPrimitive;
import java.util.List;

/** A change to a device ({@code PATCH /v1/devices/{id}}): fields not set are left as they are. */
public final class DevicePatch {
  private final JsonObject body = new JsonObject();

  /** Sets the user, or removes it with {@code null}. */
  public DevicePatch user(String user) {
    body.add("user", user == null ? JsonNull.INSTANCE : new JsonPrimitive(user));
    return this;
  }

  /** Sets the locale, or removes it with {@code null}. */
  public DevicePatch locale(String locale) {
    body.add("locale", locale == null ? JsonNull.INSTANCE : new JsonPrimitive(locale));
    return this;
  }

  /** Replaces every tag. */
  public DevicePatch tags(List<String> tags) {
    body.add("tags", array(tags));
    return this;
  }

  public DevicePatch addTags(List<String> tags) {
    body.add("add_tags", array(tags));
    return this;
  }

  public DevicePatch removeTags(List<String> tags) {
    body.add("remove_tags", array(tags));
    return this;
  }

  public DevicePatch active(boolean active) {
    body.addProperty("active", active);
    return this;
  }

  /** The JSON body. */
  public String toJson() {
    return body.toString();
  }

  private static JsonArray array(List<String> items) {
    JsonArray a = new JsonArray();
    for (String s : items) {
      a.add(s);
    }
    return a;
  }
}
