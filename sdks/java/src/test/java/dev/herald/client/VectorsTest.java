package dev.herald.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import dev.herald.client.internal.Json;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import okhttp3.OkHttpClient;
import okhttp3.Request;
import okhttp3.Response;
import org.junit.jupiter.api.Test;

/**
 * Replays herald-proto's golden vectors (read from the repository, never copied): every command
 * this SDK encodes or decodes, every WebSocket frame it decodes (and the messages of the long-poll
 * and HTTP history bodies), cursor strings, inbox cursors, error codes and bodies, and the tokens
 * it mints; the invalid tokens are presented to a real server, which must answer their code.
 */
class VectorsTest {
  private static JsonObject vectors(String file) throws Exception {
    byte[] bytes = Files.readAllBytes(Paths.get("../../crates/herald-proto/tests/vectors", file));
    return Json.parseStrict(new String(bytes, StandardCharsets.UTF_8)).getAsJsonObject();
  }

  private static List<JsonObject> cases(JsonObject file, String list) {
    List<JsonObject> out = new ArrayList<>();
    for (JsonElement e : file.getAsJsonArray(list)) {
      out.add(e.getAsJsonObject());
    }
    if (out.isEmpty()) {
      throw new AssertionError("no cases in " + list);
    }
    return out;
  }

  private static String name(JsonObject c) {
    return c.has("name") ? c.get("name").getAsString() : c.toString();
  }

  private static Long optLong(JsonElement e) {
    return e == null || e.isJsonNull() ? null : Long.parseUnsignedLong(e.getAsString());
  }

  @Test
  void commandsDecodeToTheirMeaningAndEncodeCanonically() throws Exception {
    JsonObject file = vectors("commands.json");
    for (JsonObject c : cases(file, "valid")) {
      ClientCommand command = ClientCommand.decode(c.get("wire").getAsString());
      JsonObject meaning = c.getAsJsonObject("meaning");
      assertEquals(optLong(meaning.get("id")), command.id(), name(c));
      assertEquals(meaning.get("command").getAsString(), command.name(), name(c));
      assertEquals(meaning.get("body"), command.body(), name(c));
      assertEquals(c.get("encoded").getAsString(), command.encode(), name(c));
    }
    for (JsonObject c : cases(file, "invalid")) {
      HeraldException e = assertThrows(HeraldException.class,
          () -> ClientCommand.decode(c.get("wire").getAsString()), name(c));
      JsonObject error = c.getAsJsonObject("error");
      assertEquals(error.get("code").getAsString(), e.code(), name(c));
      assertEquals(optLong(error.get("id")), ClientCommand.failedId(e), name(c));
    }
  }

  @Test
  void serverFramesDecodeToTheirMeaning() throws Exception {
    JsonObject file = vectors("frames.json");
    int checked = 0;
    for (JsonObject c : cases(file, "valid")) {
      String transport = c.get("transport").getAsString();
      String wire = c.get("wire").getAsString();
      JsonObject meaning = c.getAsJsonObject("meaning");
      if (transport.equals("ws")) {
        ServerFrame frame = ServerFrame.decode(wire);
        assertEquals(meaning.get("frame").getAsString(), frame.kind().key(), name(c));
        assertEquals(optLong(meaning.get("id")), frame.id(), name(c));
        assertEquals(meaning.get("body"), frame.body(), name(c));
        if (frame.kind() == ServerFrame.Kind.MESSAGE) {
          assertMessage(meaning.getAsJsonObject("body"), frame.message(), wire, name(c));
        }
        for (int i = 0; i < frame.messages().size(); i++) {
          JsonObject expected = meaning.getAsJsonObject("body").getAsJsonArray("messages").get(i).getAsJsonObject();
          assertMessage(expected, frame.messages().get(i), wire, name(c));
        }
        checked++;
      } else if (transport.equals("poll") || transport.equals("http")) {
        // Bodies this SDK reads over HTTP: their messages keep their data's bytes.
        List<String> raw = Json.elements(Json.members(wire).get("messages"));
        for (int i = 0; i < raw.size(); i++) {
          Message m = Message.fromJson(raw.get(i));
          JsonObject expected = meaning.getAsJsonObject("body").getAsJsonArray("messages").get(i).getAsJsonObject();
          assertMessage(expected, m, wire, name(c));
        }
        checked++;
      }
      // "sse": this SDK does not speak SSE (the WebSocket is its transport).
    }
    assertEquals(true, checked > 20);
    for (JsonObject c : cases(file, "invalid")) {
      if (c.get("transport").getAsString().equals("ws")) {
        HeraldException e = assertThrows(HeraldException.class,
            () -> ServerFrame.decode(c.get("wire").getAsString()), name(c));
        assertEquals(c.get("error").getAsString(), e.code(), name(c));
      }
    }
  }

  private static void assertMessage(JsonObject expected, Message m, String wire, String name) {
    assertEquals(expected.get("channel").getAsString(), m.channel(), name);
    assertEquals(Long.parseUnsignedLong(expected.get("seq").getAsString()), m.seq(), name);
    assertEquals(expected.get("epoch").getAsString(), m.epoch(), name);
    assertEquals(expected.get("id").getAsString(), m.id(), name);
    assertEquals(expected.get("time").getAsLong(), m.time(), name);
    assertEquals(expected.get("data"), m.data(), name);
    // The data's exact text appears in the wire: kept byte for byte.
    assertEquals(true, wire.contains(m.dataJson()), name + ": data kept byte for byte");
  }

  @Test
  void cursorStrings() throws Exception {
    JsonObject file = vectors("cursors.json");
    for (JsonObject c : cases(file, "valid")) {
      List<Cursor> parsed = CursorStrings.parse(c.get("wire").getAsString(), c.get("channels").getAsInt());
      List<Cursor> expected = new ArrayList<>();
      for (JsonElement e : c.getAsJsonArray("meaning")) {
        expected.add(e.isJsonNull() ? null : cursor(e.getAsJsonObject()));
      }
      assertEquals(expected, parsed, name(c));
      if (!c.get("encoded").isJsonNull()) {
        assertEquals(c.get("encoded").getAsString(), CursorStrings.format(parsed), name(c));
      }
    }
    for (JsonObject c : cases(file, "invalid")) {
      HeraldException e = assertThrows(HeraldException.class,
          () -> CursorStrings.parse(c.get("wire").getAsString(), c.get("channels").getAsInt()), name(c));
      assertEquals(c.get("error").getAsString(), e.code(), name(c));
    }
  }

  private static Cursor cursor(JsonObject o) {
    return new Cursor(o.get("epoch").getAsString(), Long.parseUnsignedLong(o.get("seq").getAsString()));
  }

  @Test
  void inboxCursors() throws Exception {
    JsonObject file = vectors("inbox_cursors.json");
    List<JsonObject> all = new ArrayList<>(cases(file, "valid"));
    all.addAll(cases(file, "lenient"));
    for (JsonObject c : all) {
      Cursor[] parsed = CursorStrings.parseInbox(c.get("wire").getAsString());
      JsonObject meaning = c.getAsJsonObject("meaning");
      assertEquals(cursor(meaning.getAsJsonObject("app")), parsed[0], name(c));
      assertEquals(cursor(meaning.getAsJsonObject("device")), parsed[1], name(c));
      assertEquals(c.get("encoded").getAsString(), CursorStrings.formatInbox(parsed[0], parsed[1]), name(c));
    }
  }

  @Test
  void errorCodesAndBodies() throws Exception {
    JsonObject file = vectors("errors.json");
    List<JsonObject> valid = cases(file, "valid");
    assertEquals(ErrorCode.values().length, valid.size());
    for (int i = 0; i < valid.size(); i++) {
      JsonObject c = valid.get(i);
      String code = c.get("code").getAsString();
      ErrorCode parsed = ErrorCode.fromWire(code);
      assertNotNull(parsed, code);
      assertEquals(ErrorCode.values()[i], parsed, "documented order");
      assertEquals(c.get("status").getAsInt(), parsed.httpStatus(), code);
      JsonObject body = Json.parseStrict(c.get("http_body").getAsString()).getAsJsonObject().getAsJsonObject("error");
      assertEquals(code, body.get("code").getAsString());
      assertEquals(c.get("message").getAsString(), body.get("message").getAsString());
      ServerFrame frame = ServerFrame.decode(c.get("ws_frame").getAsString());
      assertEquals(ServerFrame.Kind.ERROR, frame.kind());
      assertEquals(Long.valueOf(1), frame.id());
      assertEquals(code, frame.string("code"));
      assertEquals(c.get("message").getAsString(), frame.string("message"));
    }
    for (JsonObject c : cases(file, "invalid")) {
      assertNull(ErrorCode.fromWire(c.get("wire").getAsString()), name(c));
    }
  }

  @Test
  void tokensMintAndVerify() throws Exception {
    JsonObject file = vectors("tokens.json");
    for (JsonObject c : cases(file, "valid")) {
      JsonObject claims = c.getAsJsonObject("claims");
      ClientTokens.Claims mine = new ClientTokens.Claims();
      if (claims.has("sub")) {
        mine.sub(claims.get("sub").getAsString());
      }
      if (claims.has("exp")) {
        mine.exp(claims.get("exp").getAsLong());
      }
      if (claims.has("channels")) {
        mine.channels(strings(claims.get("channels")));
      }
      if (claims.has("publish")) {
        mine.publish(strings(claims.get("publish")));
      }
      if (claims.has("device")) {
        mine.device(claims.get("device").getAsString());
      }
      if (claims.has("iat")) {
        mine.iat(claims.get("iat").getAsLong());
      }
      if (claims.has("jti")) {
        mine.jti(claims.get("jti").getAsString());
      }
      String secret = c.get("secret").getAsString();
      assertEquals(c.get("token").getAsString(), ClientTokens.mint(secret, c.get("app").getAsString(), mine), name(c));
      assertEquals(claims, ClientTokens.verify(secret, c.get("token").getAsString()), name(c));
    }
  }

  private static List<String> strings(JsonElement array) {
    List<String> out = new ArrayList<>();
    for (JsonElement e : array.getAsJsonArray()) {
      out.add(e.getAsString());
    }
    return out;
  }

  @Test
  void invalidTokensAreRefusedByTheServerWithTheirCode() throws Exception {
    JsonObject file = vectors("tokens.json");
    String secret = cases(file, "invalid").get(0).get("secret").getAsString();
    OkHttpClient http = new OkHttpClient();
    try (HeraldServer server = HeraldServer.start(Collections.<String, String>emptyMap(),
        Collections.<String>emptyList(), secret)) {
      for (JsonObject c : cases(file, "invalid")) {
        Request request = new Request.Builder()
            .url(server.url() + "/v1/poll?channel=news&timeout=1")
            .header("Authorization", "Bearer " + c.get("token").getAsString())
            .build();
        try (Response response = http.newCall(request).execute()) {
          String body = response.body().string();
          assertEquals(401, response.code(), name(c));
          String code = Json.parseStrict(body).getAsJsonObject().getAsJsonObject("error").get("code").getAsString();
          assertEquals(c.get("error").getAsString(), code, name(c));
        }
      }
    }
  }
}
