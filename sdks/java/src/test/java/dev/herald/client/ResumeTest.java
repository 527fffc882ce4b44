package dev.herald.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Exact resume across a server killed with SIGKILL and restarted on the same port and data
 * directory: the observer sees every message once, in order, including those published while the
 * client was disconnected.
 */
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class ResumeTest {
  @Test
  void resumesExactlyAcrossKillAndRestart() throws Exception {
    try (HeraldServer server = HeraldServer.start()) {
      PublisherClient publisher = new PublisherClient(server.url(), HeraldServer.API_KEY);
      Recorder recorder = new Recorder();
      HeraldClient client = HeraldClient.builder(server.url())
          .tokenSupplier(() -> SubscriberTest.token("resumer", 3600, "resume/*"))
          .backoff(50, 500)
          .build();
      client.register(recorder);
      client.joinChannel("resume/a", 0);
      client.start();
      List<Message> seen = new ArrayList<>();
      try {
        recorder.nextSubscribed();
        for (int i = 1; i <= 3; i++) {
          publisher.publish("resume/a", "{\"n\":" + i + "}");
        }
        seen.addAll(recorder.take(3));

        // Crash: the client notices, and retries with backoff while the server is down.
        server.kill();
        HeraldException lost = recorder.nextDisconnect();
        assertNull(lost.code(), "a crash sends no disconnect frame");
        server.restart();
        for (int i = 4; i <= 6; i++) {
          publisher.publish("resume/a", "{\"n\":" + i + "}");
        }
        recorder.awaitReconnect();
        seen.addAll(recorder.take(3));

        // Published while the client is stopped: replayed when it starts again.
        client.stop();
        for (int i = 7; i <= 9; i++) {
          publisher.publish("resume/a", "{\"n\":" + i + "}");
        }
        client.start();
        recorder.awaitReconnect();
        seen.addAll(recorder.take(3));

        // A last live message: anything duplicated would have come before it.
        publisher.publish("resume/a", "{\"n\":10}");
        seen.add(recorder.nextMessage());
      } finally {
        client.stop();
      }
      assertEquals(Recorder.range(1, 10), Recorder.seqs(seen), "every message once, in order");
      for (int i = 0; i < seen.size(); i++) {
        assertEquals("{\"n\":" + (i + 1) + "}", seen.get(i).dataJson());
      }
      assertTrue(recorder.messages.isEmpty(), "no duplicate after the last message");
      assertTrue(recorder.resets.isEmpty(), "every resume was exact");
      for (String subscribe : recorder.subscribed) {
        assertTrue(subscribe.endsWith(" true"), "resubscribed with recovered=true: " + subscribe);
      }
      assertFalse(recorder.subscribed.isEmpty());
    }
  }
}
