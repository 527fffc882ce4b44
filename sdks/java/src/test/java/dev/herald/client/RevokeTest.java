package dev.herald.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.gson.JsonObject;
import dev.herald.client.model.DeviceInbox;
import dev.herald.client.model.MintedToken;
import dev.herald.client.model.Overview;
import dev.herald.client.model.PushAccepted;
import dev.herald.client.model.PushRequest;
import dev.herald.client.model.PushTarget;
import dev.herald.client.model.Registration;
import dev.herald.client.model.RevokeRequest;
import dev.herald.client.model.TokenRequest;
import java.util.Collections;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.function.Executable;

/**
 * Revocation and the dashboard's routes against a real server: {@code revoke} of each kind with its
 * error paths, tokens with {@code jti} and {@code iat}, a subscriber revoked by its token's
 * {@code jti} (it stops with {@code revoked} and never connects again), {@code overview} and
 * {@code deviceInbox}.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class RevokeTest {
  private static HeraldServer server;
  private static PublisherClient publisher;
  private static PublisherClient admin;

  @BeforeAll
  static void startServer() throws Exception {
    server = HeraldServer.start();
    publisher = new PublisherClient(server.url(), HeraldServer.API_KEY);
    admin = new PublisherClient(server.url(), HeraldServer.ADMIN_KEY);
  }

  @AfterAll
  static void stopServer() throws Exception {
    server.close();
  }

  private static HeraldException fails(String code, int status, Executable call) {
    HeraldException e = assertThrows(HeraldException.class, call);
    assertEquals(code, e.code(), e.toString());
    assertEquals(status, e.httpStatus(), e.toString());
    return e;
  }

  private static long now() {
    return System.currentTimeMillis() / 1000;
  }

  @Test
  void revokeEachKindAndItsErrors() {
    assertEquals(0, publisher.revoke("default", RevokeRequest.all()).closed);
    assertEquals(0, publisher.revoke("default", RevokeRequest.sub("nobody")).closed);
    assertEquals(0, publisher.revoke("default", RevokeRequest.device("no-device")).closed);
    assertEquals(0, publisher.revoke("default", RevokeRequest.jti("never-used", now() + 60)).closed);
    assertEquals(0, admin.revoke("default", RevokeRequest.jti("never-used-2")).closed);

    RevokeRequest two = RevokeRequest.sub("a");
    two.device = "b";
    fails("bad_request", 400, () -> publisher.revoke("default", two));
    fails("bad_request", 400, () -> publisher.revoke("default", RevokeRequest.issuedBefore(now() + 3600)));
    fails("not_found", 404, () -> admin.revoke("no-such-app", RevokeRequest.all()));
    fails("unauthorized", 401, () -> new PublisherClient(server.url(), "hk_wrong").revoke("default", RevokeRequest.all()));
  }

  @Test
  void mintedTokensCarryJtiAndIatAndARevokedJtiIsRefused() throws Exception {
    MintedToken minted = publisher.mintToken(new TokenRequest().sub("j").jti("server-jti-1")
        .channels(Collections.singletonList("revoked-jti/**")).ttl(60L));
    JsonObject claims = ClientTokens.verify(HeraldServer.TOKEN_SECRET, minted.token);
    assertEquals("server-jti-1", claims.get("jti").getAsString());
    assertTrue(claims.get("iat").getAsLong() > 0);
    publisher.revoke("default", RevokeRequest.jti("server-jti-1", minted.expires));

    Recorder recorder = new Recorder();
    HeraldClient client = HeraldClient.builder(server.url()).tokenSupplier(() -> minted.token).backoff(50, 500).build();
    client.register(recorder);
    client.start();
    try {
      HeraldException refused = recorder.nextError();
      assertEquals("unauthorized", refused.code(), refused.toString());
    } finally {
      client.stop();
    }
  }

  @Test
  void issuedBeforeRefusesOlderTokens() throws Exception {
    // Stored for the whole app, and it refuses tokens without iat: a server of its own.
    try (HeraldServer own = HeraldServer.start()) {
      long now = now();
      new PublisherClient(own.url(), HeraldServer.API_KEY).revoke("default", RevokeRequest.issuedBefore(now));
      Recorder oldRecorder = new Recorder();
      HeraldClient old = client(own, oldRecorder, new ClientTokens.Claims().sub("old").iat(now - 3600).jti("old"));
      try {
        HeraldException refused = oldRecorder.nextError();
        assertEquals("unauthorized", refused.code(), refused.toString());
      } finally {
        old.stop();
      }
      Recorder freshRecorder = new Recorder();
      HeraldClient fresh = client(own, freshRecorder, new ClientTokens.Claims().sub("new").iat(now).jti("new"));
      try {
        assertEquals("issued/a :0 false", freshRecorder.nextSubscribed());
      } finally {
        fresh.stop();
      }
    }
  }

  /** A started client of {@code on} with a static token of {@code claims}, joined to {@code issued/a}. */
  private static HeraldClient client(HeraldServer on, Recorder recorder, ClientTokens.Claims claims) {
    String token = ClientTokens.mint(HeraldServer.TOKEN_SECRET, "default",
        claims.channels(Collections.singletonList("issued/**")));
    HeraldClient client = HeraldClient.builder(on.url()).tokenSupplier(() -> token).backoff(50, 500).build();
    client.register(recorder);
    client.joinChannel("issued/a", 0);
    client.start();
    return client;
  }

  @Test
  void aRevokedSubscriberStopsAndDoesNotReconnect() throws Exception {
    AtomicInteger calls = new AtomicInteger();
    Recorder recorder = new Recorder();
    // A supplier that could go on forever: the client must not ask it again.
    HeraldClient client = HeraldClient.builder(server.url()).tokenSupplier(() -> {
      calls.incrementAndGet();
      return ClientTokens.mint(HeraldServer.TOKEN_SECRET, "default", new ClientTokens.Claims()
          .sub("r").jti("revoke-me").channels(Collections.singletonList("revoke/**")));
    }).backoff(50, 500).build();
    client.register(recorder);
    client.joinChannel("revoke/a", 0);
    client.start();
    try {
      recorder.nextSubscribed();
      assertEquals(1, publisher.revoke("default", RevokeRequest.jti("revoke-me", now() + 600)).closed);
      HeraldException reason = recorder.nextDisconnect();
      assertEquals("revoked", reason.code(), reason.toString());
      assertFalse(reason.getMessage().isEmpty());
      assertFalse(client.isRunning());
      // No connection holds the token any more, and the supplier was asked once.
      assertEquals(0, publisher.revoke("default", RevokeRequest.jti("revoke-me")).closed);
      assertEquals(1, calls.get());
      assertTrue(recorder.reconnects.isEmpty());
      assertTrue(recorder.disconnects.isEmpty());
    } finally {
      client.stop();
    }
  }

  @Test
  void overviewWithTheAdminKeyAndAPublisherKey() {
    Overview all = admin.overview();
    assertEquals("admin", all.role);
    assertNotNull(all.server);
    assertTrue(all.timeMs > 0);
    assertTrue(all.server.deliveryLag.count >= 0);
    assertTrue(all.apps.stream().anyMatch(a -> a.app.equals("default")));
    Overview own = publisher.overview();
    assertEquals("publisher", own.role);
    assertNull(own.server);
    assertEquals(1, own.apps.size());
    assertEquals("default", own.apps.get(0).app);
    assertNotNull(own.apps.get(0).usage);
    fails("unauthorized", 401, () -> new PublisherClient(server.url(), "hk_wrong").overview());
  }

  @Test
  void deviceInbox() {
    publisher.registerDevice(new Registration().platform("herald").id("inbox-dev"));
    PushAccepted accepted = publisher.push(new PushRequest(PushTarget.device("inbox-dev")).data("{\"n\":1}"));
    DeviceInbox inbox = publisher.deviceInbox("inbox-dev");
    assertEquals("inbox-dev", inbox.device);
    assertEquals(1, inbox.deviceLog.head.seq);
    assertEquals(1, inbox.deviceLog.unacked);
    assertEquals(1, inbox.recent.size());
    assertEquals(accepted.id, inbox.recent.get(0).id);
    assertEquals("device", inbox.recent.get(0).log);
    assertFalse(inbox.recent.get(0).acked);
    assertNotNull(inbox.recent.get(0).receipt);
    fails("not_found", 404, () -> publisher.deviceInbox("nope"));
  }
}
