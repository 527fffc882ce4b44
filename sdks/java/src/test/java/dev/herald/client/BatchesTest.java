package dev.herald.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import dev.herald.client.model.BatchItem;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A reconnect resubscribes every channel in batches (JSON arrays of commands, docs/protocol.md
 * "Batches"), seen through a proxy that records the client's WebSocket messages, and every
 * channel still resumes exactly: each message once, in order.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class BatchesTest {
  private static final int CHANNELS = 250;

  @Test
  void aReconnectResubscribesInBatchesAndResumesExactly() throws Exception {
    try (HeraldServer server = HeraldServer.start()) {
      String url = server.url();
      int port = Integer.parseInt(url.substring(url.lastIndexOf(':') + 1));
      try (FrameCountingProxy proxy = new FrameCountingProxy(port)) {
        PublisherClient publisher = new PublisherClient(url, HeraldServer.API_KEY);
        Recorder recorder = new Recorder();
        HeraldClient client = HeraldClient.builder(proxy.url())
            .tokenSupplier(() -> SubscriberTest.token("batcher", 3600, "batch/*"))
            .backoff(50, 500)
            .build();
        client.register(recorder);
        List<String> channels = new ArrayList<>();
        for (int i = 0; i < CHANNELS; i++) {
          channels.add("batch/c" + i);
          client.joinChannel("batch/c" + i, 0);
        }
        client.start();
        Map<String, List<String>> got = new LinkedHashMap<>();
        try {
          for (int i = 0; i < CHANNELS; i++) {
            recorder.nextSubscribed();
          }
          publishRound(publisher, channels, 1);
          record(got, recorder.take(CHANNELS));

          server.kill();
          HeraldException lost = recorder.nextDisconnect();
          assertNull(lost.code(), "a crash sends no disconnect frame");
          server.restart();
          publishRound(publisher, channels, 2);
          publishRound(publisher, channels, 3);
          recorder.awaitReconnect();
          publishRound(publisher, channels, 4);
          record(got, recorder.take(3 * CHANNELS));
        } finally {
          client.stop();
        }
        for (String channel : channels) {
          assertEquals(List.of("{\"n\":1}", "{\"n\":2}", "{\"n\":3}", "{\"n\":4}"), got.get(channel),
              channel + ": every message once, in order");
        }
        assertTrue(recorder.messages.isEmpty(), "nothing more");
        assertTrue(recorder.resets.isEmpty(), "every resume was exact");

        assertEquals(2, proxy.connections.size(), "one reconnect");
        for (int c = 0; c < 2; c++) {
          List<JsonObject> subscribes = new ArrayList<>();
          int carrying = 0;
          for (String text : new ArrayList<>(proxy.connections.get(c))) {
            JsonElement parsed = JsonParser.parseString(text);
            JsonArray commands = parsed.isJsonArray() ? parsed.getAsJsonArray() : new JsonArray();
            if (parsed.isJsonObject()) {
              commands.add(parsed);
            }
            int before = subscribes.size();
            for (JsonElement command : commands) {
              if (command.getAsJsonObject().has("subscribe")) {
                subscribes.add(command.getAsJsonObject());
              }
            }
            carrying += subscribes.size() > before ? 1 : 0;
          }
          assertEquals(CHANNELS, subscribes.size(), "connection " + (c + 1) + ": a subscribe per channel");
          assertEquals(3, carrying, "connection " + (c + 1) + ": 250 subscribes in batches of at most 100");
          Set<Long> ids = new HashSet<>();
          for (JsonObject s : subscribes) {
            ids.add(s.get("id").getAsLong());
            if (c == 1) {
              assertEquals(1, s.getAsJsonObject("subscribe").getAsJsonObject("since").get("seq").getAsLong(),
                  "resumes after the message received: " + s);
            }
          }
          assertEquals(CHANNELS, ids.size(), "each command with its own id");
        }
      }
    }
  }

  private static void publishRound(PublisherClient publisher, List<String> channels, int n) {
    List<BatchItem> items = new ArrayList<>();
    for (String channel : channels) {
      items.add(new BatchItem(channel, "{\"n\":" + n + "}", null));
    }
    publisher.publishBatch(items);
  }

  private static void record(Map<String, List<String>> got, List<Message> messages) {
    for (Message m : messages) {
      got.computeIfAbsent(m.channel(), k -> new ArrayList<>()).add(m.dataJson());
    }
  }

  @Test
  void idsAreReadFromTheCommandsThisSdkWrites() {
    assertEquals(7L, Connection.idOf(ClientCommand.subscribe(7L, "news", null, false, null)));
    assertNull(Connection.idOf("{\"ping\":{}}"));
  }
}
