package dev.herald.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.herald.client.model.PushRequest;
import dev.herald.client.model.PushTarget;
import dev.herald.client.model.Registration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The device inbox over the WebSocket: a device token's connection receives its pushes; acks are
 * automatic after the observer returns normally, or manual. What was acknowledged is not sent
 * again; what was not comes again on the next connection.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class InboxTest {
  private static HeraldServer server;
  private static PublisherClient publisher;

  @BeforeAll
  static void startServer() throws Exception {
    server = HeraldServer.start();
    publisher = new PublisherClient(server.url(), HeraldServer.API_KEY);
  }

  @AfterAll
  static void stopServer() throws Exception {
    server.close();
  }

  private static String deviceToken(String device) {
    return ClientTokens.mint(HeraldServer.TOKEN_SECRET, "default",
        new ClientTokens.Claims().sub(device).device(device));
  }

  private static HeraldClient client(String device, boolean autoAck, Recorder recorder) {
    HeraldClient client = HeraldClient.builder(server.url())
        .token(deviceToken(device)).autoAck(autoAck).backoff(50, 500).build();
    client.register(recorder);
    client.start();
    return client;
  }

  private static String push(String device, String data) {
    return publisher.push(new PushRequest(PushTarget.device(device)).data(data)).id;
  }

  /** Waits (bounded) until the server counts the push as delivered: acks are stored asynchronously to the observer. */
  private static void awaitDelivered(String pushId) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(Recorder.WAIT_SECONDS);
    while (publisher.receipt(pushId).delivered != 1) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError("push " + pushId + " was never acknowledged");
      }
      Thread.sleep(20); // polling the server's receipt: there is no push notification of an ack
    }
  }

  @Test
  void automaticAcksAfterTheObserverReturns() throws Exception {
    publisher.registerDevice(new Registration().platform("herald").id("auto-1"));
    Recorder recorder = new Recorder();
    HeraldClient client = client("auto-1", true, recorder);
    String first;
    try {
      first = push("auto-1", "{ \"n\" : 1 }");
      Message m = recorder.nextMessage();
      assertTrue(m.isInbox());
      assertEquals(Message.DEVICE_LOG, m.channel());
      assertEquals(first, m.id());
      assertEquals("{ \"n\" : 1 }", m.pushDataJson(), "push data byte for byte");
      assertTrue(m.envelope().has("expires"));
      awaitDelivered(first);
    } finally {
      client.stop();
    }
    // A new connection starts from the acknowledged cursor: the first push is not sent again.
    Recorder again = new Recorder();
    HeraldClient second = client("auto-1", true, again);
    try {
      String next = push("auto-1", "2");
      assertEquals(next, again.nextMessage().id());
      assertTrue(again.errors.isEmpty(), again.errors.toString());
    } finally {
      second.stop();
    }
  }

  @Test
  void manualAcks() throws Exception {
    publisher.registerDevice(new Registration().platform("herald").id("manual-1"));
    Recorder recorder = new Recorder();
    HeraldClient client = client("manual-1", false, recorder);
    String first;
    try {
      first = push("manual-1", "{\"n\":1}");
      assertEquals(first, recorder.nextMessage().id());
      assertEquals(0, publisher.receipt(first).delivered, "not acknowledged yet");
    } finally {
      client.stop();
    }
    // Not acknowledged: it comes again; acknowledge it by hand this time.
    Recorder again = new Recorder();
    HeraldClient second = client("manual-1", false, again);
    try {
      Message redelivered = again.nextMessage();
      assertEquals(first, redelivered.id());
      CompletableFuture<Void> acked = second.ack(redelivered);
      acked.get(Recorder.WAIT_SECONDS, TimeUnit.SECONDS);
      assertEquals(1, publisher.receipt(first).delivered);
    } finally {
      second.stop();
    }
    Recorder third = new Recorder();
    HeraldClient last = client("manual-1", false, third);
    try {
      String next = push("manual-1", "3");
      assertEquals(next, third.nextMessage().id(), "the acknowledged push is not sent again");
    } finally {
      last.stop();
    }
  }

  @Test
  void anUnregisteredDeviceIsReported() throws Exception {
    Recorder recorder = new Recorder();
    HeraldClient client = client("nobody-1", true, recorder);
    try {
      HeraldException error = recorder.nextError();
      assertEquals("not_found", error.code());
    } finally {
      client.stop();
    }
  }
}
