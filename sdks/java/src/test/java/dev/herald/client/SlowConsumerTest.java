package dev.herald.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.herald.client.model.BatchItem;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A client that stops reading (its observer blocks) overflows the server's outbound queue (4096
 * bytes here): the server disconnects it as {@code slow_consumer}, the observer is told so with the
 * server's code and message, and the client resumes after the last message it handed over.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class SlowConsumerTest {
  private static final Pattern SLOW = Pattern.compile("(?m)^herald_slow_consumer_disconnects_total(?:\\{[^}]*\\})? (\\d+)");

  private static long slowDisconnects(PublisherClient publisher) {
    Matcher m = SLOW.matcher(publisher.metrics());
    long total = 0;
    while (m.find()) {
      total += Long.parseLong(m.group(1));
    }
    return total;
  }

  @Test
  void aBlockedObserverIsDisconnectedAsSlowConsumerAndResumes() throws Exception {
    try (HeraldServer server = HeraldServer.start(
        Collections.singletonMap("HERALD_OUTBOX_BYTES", "4096"), Collections.<String>emptyList())) {
      PublisherClient publisher = new PublisherClient(server.url(), HeraldServer.API_KEY);
      CountDownLatch release = new CountDownLatch(1);
      Recorder recorder = new Recorder() {
        @Override
        public void onPush(Message message) {
          super.onPush(message);
          if (message.seq() == 1) {
            try {
              release.await(60, TimeUnit.SECONDS); // stop reading the socket
            } catch (InterruptedException e) {
              Thread.currentThread().interrupt();
            }
          }
        }
      };
      HeraldClient client = HeraldClient.builder(server.url())
          .tokenSupplier(() -> SubscriberTest.token("slow", 3600, "slow/*"))
          .backoff(50, 500)
          .build();
      client.register(recorder);
      client.joinChannel("slow/a", 0);
      client.start();
      try {
        recorder.nextSubscribed();
        StringBuilder padding = new StringBuilder();
        for (int i = 0; i < 50_000; i++) {
          padding.append('x');
        }
        String data = "\"" + padding + "\"";
        publisher.publish("slow/a", data);
        recorder.nextMessage(); // seq 1: the observer now blocks
        // Fill the socket buffers and the 4 KiB queue until the server gives up on the client.
        long published = 1;
        long before = slowDisconnects(publisher);
        for (int round = 0; round < 40 && slowDisconnects(publisher) == before; round++) {
          List<BatchItem> batch = new ArrayList<>();
          for (int i = 0; i < 50; i++) {
            batch.add(new BatchItem("slow/a", data, null));
          }
          published += publisher.publishBatch(batch).size();
        }
        assertTrue(slowDisconnects(publisher) > before, "the server disconnected a slow consumer");
        release.countDown();

        HeraldException reason = recorder.nextDisconnect();
        assertEquals("slow_consumer", reason.code());
        assertFalse(reason.getMessage().isEmpty());
        recorder.awaitReconnect();
        List<Message> rest = recorder.take((int) published - 1);
        List<Long> seqs = new ArrayList<>(Collections.singletonList(1L));
        seqs.addAll(Recorder.seqs(rest));
        publisher.publish("slow/a", "\"last\"");
        Message last = recorder.nextMessage();
        seqs.add(last.seq());
        assertEquals(Recorder.range(1, published + 1), seqs, "every message once, in order");
      } finally {
        release.countDown();
        client.stop();
      }
    }
  }
}
