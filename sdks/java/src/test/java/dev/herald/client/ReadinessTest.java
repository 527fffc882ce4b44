package dev.herald.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import dev.herald.client.model.Readiness;
import java.util.Arrays;
import java.util.Collections;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@link PublisherClient#ready()} on a node that is not ready: a server under a 3 MiB file-size
 * limit ({@code prlimit}) whose store publishes have filled refuses writes with
 * {@code insufficient_storage}; {@code ready()} then throws {@link NotReadyException} naming the
 * failing check, while {@code health()} (liveness) stays {@code ok}.
 */
class ReadinessTest {
  private static final long LIMIT_BYTES = 3L << 20;

  @Test
  @Timeout(value = 120, unit = TimeUnit.SECONDS)
  void aFullStoreIsNotReadyAndNamedWhileHealthStaysOk() throws Exception {
    try (HeraldServer server = HeraldServer.startThrough(
        Arrays.asList("prlimit", "--fsize=" + LIMIT_BYTES + ":"),
        Collections.singletonMap("HERALD_HISTORY_SIZE", "100000"))) {
      PublisherClient publisher = new PublisherClient(server.url(), HeraldServer.API_KEY);
      StringBuilder blob = new StringBuilder("\"");
      for (int i = 0; i < 16 * 1024; i++) {
        blob.append('x');
      }
      String data = blob.append('"').toString();
      NotReadyException notReady = null;
      // A background write (the usage counters) may find room again after a checkpoint emptied
      // the write-ahead log and clear the fault: fill again then.
      for (int round = 0; round < 20 && notReady == null; round++) {
        fill(publisher, data);
        try {
          publisher.ready();
        } catch (NotReadyException e) {
          notReady = e;
        }
      }
      assertNotNull(notReady, "ready() reported the full store");
      assertEquals("not_ready", notReady.code(), notReady.toString());
      assertEquals(503, notReady.httpStatus());
      assertTrue(notReady.getMessage().startsWith("store: insufficient_storage: "), notReady.getMessage());
      assertTrue(notReady.getMessage().contains("File too large"), notReady.getMessage());
      Readiness readiness = notReady.readiness();
      assertFalse(readiness.isReady());
      assertEquals("not_ready", readiness.status);
      assertEquals("failing", readiness.checks.store.status);
      assertEquals("insufficient_storage", readiness.checks.store.error.code);
      assertTrue(readiness.checks.bus.isOk());
      assertFalse(readiness.checks.draining);
      assertEquals(Collections.singleton("store"), notReady.failing().keySet());
      assertEquals(ErrorCode.INSUFFICIENT_STORAGE, notReady.failing().get("store").errorCode());
      assertEquals("ok", publisher.health());
    }
  }

  /** Publishes 16 KiB messages until one is refused for lack of space. */
  private static void fill(PublisherClient publisher, String data) {
    for (int i = 0; i < 2000; i++) {
      try {
        publisher.publish("fill", data);
      } catch (HeraldException refused) {
        assertEquals("insufficient_storage", refused.code(), refused.toString());
        assertEquals(507, refused.httpStatus());
        return;
      }
    }
    fail("2000 publishes of 16 KiB fitted under a 3 MiB file-size limit");
  }
}
