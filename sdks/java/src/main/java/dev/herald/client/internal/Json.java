package dev.herald.client.internal;

import com.google.gson.Gson;
import com.google.gson.GsonBuilder;
import com.google.gson.JsonElement;
import com.google.gson.JsonParseException;
import com.google.gson.Strictness;
import com.google.gson.TypeAdapter;
import com.google.gson.stream.JsonReader;
import com.google.gson.stream.JsonToken;
import java.io.IOException;
import java.io.StringReader;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * JSON helpers over Gson: a strict parser (Gson's own {@code JsonParser} is lenient), and a scanner
 * that finds the exact text of object members and array elements, so a message's {@code data} reaches
 * the user byte for byte (whitespace and number spelling kept) as the protocol promises. Not part of
 * the public API.
 */
public final class Json {
  private Json() {}

  /** Gson for the publisher API's models: snake_case fields, nulls left out. */
  public static final Gson GSON =
      new GsonBuilder()
          .setFieldNamingPolicy(com.google.gson.FieldNamingPolicy.LOWER_CASE_WITH_UNDERSCORES)
          .disableHtmlEscaping()
          .create();

  private static final TypeAdapter<JsonElement> ELEMENT = GSON.getAdapter(JsonElement.class);

  /** Parses one JSON value strictly (RFC 8259, nothing after it). */
  public static JsonElement parseStrict(String text) {
    try {
      JsonReader reader = new JsonReader(new StringReader(text));
      reader.setStrictness(Strictness.STRICT);
      JsonElement value = ELEMENT.read(reader);
      if (reader.peek() != JsonToken.END_DOCUMENT) {
        throw new JsonParseException("text after the JSON value");
      }
      return value;
    } catch (IOException | IllegalStateException | NumberFormatException e) {
      throw new JsonParseException(e.getMessage(), e);
    }
  }

  /** The members of the object {@code text} (valid JSON), each value as its exact text. */
  public static Map<String, String> members(String text) {
    Map<String, String> out = new LinkedHashMap<>();
    int i = skipWs(text, 0);
    expect(text, i, '{');
    i = skipWs(text, i + 1);
    if (text.charAt(i) == '}') {
      return out;
    }
    while (true) {
      int keyEnd = valueEnd(text, i);
      String key = parseStrict(text.substring(i, keyEnd)).getAsString();
      i = skipWs(text, keyEnd);
      expect(text, i, ':');
      int start = skipWs(text, i + 1);
      int end = valueEnd(text, start);
      out.put(key, text.substring(start, end));
      i = skipWs(text, end);
      if (text.charAt(i) == ',') {
        i = skipWs(text, i + 1);
      } else {
        expect(text, i, '}');
        return out;
      }
    }
  }

  /** The elements of the array {@code text} (valid JSON), each as its exact text. */
  public static List<String> elements(String text) {
    List<String> out = new ArrayList<>();
    int i = skipWs(text, 0);
    expect(text, i, '[');
    i = skipWs(text, i + 1);
    if (text.charAt(i) == ']') {
      return out;
    }
    while (true) {
      int end = valueEnd(text, i);
      out.add(text.substring(i, end));
      i = skipWs(text, end);
      if (text.charAt(i) == ',') {
        i = skipWs(text, i + 1);
      } else {
        expect(text, i, ']');
        return out;
      }
    }
  }

  private static void expect(String text, int i, char c) {
    if (i >= text.length() || text.charAt(i) != c) {
      throw new JsonParseException("expected '" + c + "' at " + i);
    }
  }

  private static int skipWs(String s, int i) {
    while (i < s.length()) {
      char c = s.charAt(i);
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
        break;
      }
      i++;
    }
    return i;
  }

  /** The index just after the JSON value that starts at {@code i}. */
  private static int valueEnd(String s, int i) {
    char c = s.charAt(i);
    if (c == '"') {
      i++;
      while (s.charAt(i) != '"') {
        i += s.charAt(i) == '\\' ? 2 : 1;
      }
      return i + 1;
    }
    if (c == '{' || c == '[') {
      int depth = 0;
      while (true) {
        char d = s.charAt(i);
        if (d == '"') {
          i = valueEnd(s, i);
          continue;
        }
        if (d == '{' || d == '[') {
          depth++;
        } else if (d == '}' || d == ']') {
          depth--;
          if (depth == 0) {
            return i + 1;
          }
        }
        i++;
      }
    }
    while (i < s.length() && ",}] \t\r\n".indexOf(s.charAt(i)) < 0) {
      i++;
    }
    return i;
  }
}
