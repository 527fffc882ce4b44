package dev.herald.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The Deacon-shaped subscriber against a real server: join, catch-up, refusals, tokens. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class SubscriberTest {
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

  static String token(String sub, long ttlSeconds, String... channels) {
    return ClientTokens.mint(HeraldServer.TOKEN_SECRET, "default", new ClientTokens.Claims()
        .sub(sub).exp(System.currentTimeMillis() / 1000 + ttlSeconds).channels(Arrays.asList(channels)));
  }

  private static HeraldClient client(TokenSupplier tokens, Recorder recorder) {
    HeraldClient client = HeraldClient.builder(server.url()).tokenSupplier(tokens).backoff(50, 500).build();
    client.register(recorder);
    return client;
  }

  @Test
  void joinThenReceiveInOrder() throws Exception {
    Recorder recorder = new Recorder();
    HeraldClient client = client(() -> token("alice", 3600, "join/**"), recorder);
    client.joinChannel("join/a", 0);
    assertTrue(client.checkChannel("join/a"));
    client.start();
    try {
      assertEquals("join/a :0 false", recorder.nextSubscribed());
      publisher.publish("join/a", "{ \"n\" : 1 }");
      publisher.publish("join/a", "[2]");
      List<Message> got = recorder.take(2);
      assertEquals(Recorder.range(1, 2), Recorder.seqs(got));
      assertEquals("{ \"n\" : 1 }", got.get(0).dataJson(), "data kept byte for byte");
      assertEquals(got.get(1).cursor(), client.cursor("join/a"));
      assertTrue(recorder.errors.isEmpty());
    } finally {
      client.stop();
    }
    assertFalse(client.isRunning());
  }

  @Test
  void catchUpReplaysTheNewestMessagesThenLive() throws Exception {
    for (int i = 1; i <= 5; i++) {
      publisher.publish("catchup/a", "{\"n\":" + i + "}");
      publisher.publish("catchup/b", "{\"n\":" + i + "}");
    }
    Recorder recorder = new Recorder();
    HeraldClient client = client(() -> token("bob", 3600, "catchup/*"), recorder);
    client.joinChannel("catchup/a", 3);
    client.start();
    try {
      assertEquals(Recorder.range(3, 5), Recorder.seqs(recorder.take(3)));
      client.joinChannel("catchup/b", HeraldClient.CATCH_UP_ALL);
      assertEquals(Recorder.range(1, 5), Recorder.seqs(recorder.take(5)));
      publisher.publish("catchup/a", "6");
      Message live = recorder.nextMessage();
      assertEquals("catchup/a", live.channel());
      assertEquals(6, live.seq());
    } finally {
      client.stop();
    }
  }

  @Test
  void aRefusedSubscribeReachesTheObserverWithTheServersCode() throws Exception {
    Recorder recorder = new Recorder();
    HeraldClient client = client(() -> token("carol", 3600, "allowed/*"), recorder);
    client.joinChannel("secret/x", 0);
    client.joinChannel("allowed/x", 0);
    client.start();
    try {
      HeraldException error = recorder.nextError();
      assertEquals("forbidden", error.code());
      assertEquals(ErrorCode.FORBIDDEN, error.errorCode());
      assertEquals("secret/x", error.channel());
      assertTrue(error.getMessage().contains("secret/x"), error.getMessage());
      recorder.nextSubscribed();
      assertFalse(client.checkChannel("secret/x"), "a refused channel is left");
      assertEquals(Collections.singletonList("allowed/x"), client.channels());
    } finally {
      client.stop();
    }
  }

  @Test
  void anExpiredTokenDisconnectsAndTheSupplierIsAskedAgain() throws Exception {
    AtomicInteger calls = new AtomicInteger();
    Recorder recorder = new Recorder();
    // The first token expires within two to three seconds; later ones last an hour.
    HeraldClient client = client(
        () -> calls.incrementAndGet() == 1 ? token("dave", 3, "expiry/*") : token("dave", 3600, "expiry/*"),
        recorder);
    client.joinChannel("expiry/a", 0);
    client.start();
    try {
      recorder.nextSubscribed();
      publisher.publish("expiry/a", "1");
      assertEquals(1, recorder.nextMessage().seq());
      HeraldException reason = recorder.nextDisconnect();
      assertEquals("token_expired", reason.code());
      assertEquals(ErrorCode.TOKEN_EXPIRED, reason.errorCode());
      recorder.awaitReconnect();
      assertTrue(calls.get() >= 2, "the supplier was called again");
      assertEquals("expiry/a " + client.cursor("expiry/a") + " true", recorder.nextSubscribed(), "resumed exactly");
      publisher.publish("expiry/a", "2");
      assertEquals(2, recorder.nextMessage().seq());
    } finally {
      client.stop();
    }
  }

  @Test
  void refreshingToANarrowerTokenLeavesTheChannelsItNoLongerAllows() throws Exception {
    AtomicInteger calls = new AtomicInteger();
    Recorder recorder = new Recorder();
    HeraldClient client = client(
        () -> calls.incrementAndGet() == 1 ? token("erin", 3600, "refresh/*") : token("erin", 3600, "refresh/a"),
        recorder);
    client.joinChannel("refresh/a", 0);
    client.joinChannel("refresh/b", 0);
    client.start();
    try {
      recorder.nextSubscribed();
      recorder.nextSubscribed();
      client.refreshToken().get(20, TimeUnit.SECONDS);
      HeraldException error = recorder.nextError();
      assertEquals("forbidden", error.code());
      assertEquals("refresh/b", error.channel());
      assertEquals(Collections.singletonList("refresh/a"), client.channels());
    } finally {
      client.stop();
    }
  }

  @Test
  void backoffIsCappedWithFullJitter() {
    Backoff backoff = new Backoff(100, 1000, new java.util.Random(7));
    long[] ceilings = new long[6];
    for (int i = 0; i < ceilings.length; i++) {
      ceilings[i] = backoff.ceilingMillis();
      long delay = backoff.nextDelayMillis();
      assertTrue(delay >= 0 && delay <= ceilings[i], "full jitter under the ceiling");
    }
    assertEquals(Arrays.toString(new long[] {100, 200, 400, 800, 1000, 1000}), Arrays.toString(ceilings));
    backoff.reset();
    assertEquals(100, backoff.ceilingMillis());
  }
}
