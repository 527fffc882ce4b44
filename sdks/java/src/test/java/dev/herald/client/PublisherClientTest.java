package dev.herald.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.gson.JsonObject;
import dev.herald.client.model.AckResult;
import dev.herald.client.model.App;
import dev.herald.client.model.AppLimits;
import dev.herald.client.model.AuditEntry;
import dev.herald.client.model.AuditPage;
import dev.herald.client.model.AppStats;
import dev.herald.client.model.BatchItem;
import dev.herald.client.model.BatchResult;
import dev.herald.client.model.ChannelInfo;
import dev.herald.client.model.ChannelList;
import dev.herald.client.model.ChannelPresence;
import dev.herald.client.model.CreatedApp;
import dev.herald.client.model.CreatedKey;
import dev.herald.client.model.DeadLetterList;
import dev.herald.client.model.Device;
import dev.herald.client.model.DeviceBatchResult;
import dev.herald.client.model.DeviceList;
import dev.herald.client.model.DevicePatch;
import dev.herald.client.model.History;
import dev.herald.client.model.JobStats;
import dev.herald.client.model.KeyInfo;
import dev.herald.client.model.MintedToken;
import dev.herald.client.model.Notification;
import dev.herald.client.model.ProviderPublic;
import dev.herald.client.model.PublicKey;
import dev.herald.client.model.Published;
import dev.herald.client.model.PushAccepted;
import dev.herald.client.model.PushRequest;
import dev.herald.client.model.PushTarget;
import dev.herald.client.model.Readiness;
import dev.herald.client.model.Receipt;
import dev.herald.client.model.Registration;
import dev.herald.client.model.RotatedSecret;
import dev.herald.client.model.TokenKeys;
import dev.herald.client.model.TokenRequest;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.function.Executable;

/** Every route of docs/openapi.yaml through {@link PublisherClient}, each with an error path. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class PublisherClientTest {
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
    assertFalse(e.getMessage().isEmpty());
    assertTrue(e.isFromServer());
    return e;
  }

  @Test
  void operations() {
    assertEquals("ok", publisher.health());
    Readiness readiness = publisher.ready();
    assertTrue(readiness.isReady());
    assertEquals("ready", readiness.status);
    assertTrue(readiness.checks.store.isOk());
    assertNull(readiness.checks.store.error);
    assertEquals("local", readiness.checks.bus.link);
    assertFalse(readiness.checks.draining);
    assertTrue(publisher.metrics().contains("herald_"));
    assertTrue(publisher.openapi().startsWith("openapi: 3"));
    PublisherClient wrongKey = new PublisherClient(server.url(), "hk_wrong");
    fails("unauthorized", 401, () -> wrongKey.listChannels(null, null));
    HeraldException down = assertThrows(HeraldException.class,
        () -> new PublisherClient("http://127.0.0.1:1", "k").health());
    assertNull(down.code(), "no server answered");
    assertNotNull(down.getCause());
    HeraldException downReady = assertThrows(HeraldException.class,
        () -> new PublisherClient("http://127.0.0.1:1", "k").ready());
    assertNull(downReady.code(), "no server answered");
  }

  @Test
  void presenceListsAPresenceChannelsMembers() throws Exception {
    java.nio.file.Path config = java.nio.file.Files.createTempFile("herald-presence", ".toml");
    java.nio.file.Files.write(config,
        "[[namespaces]]\nprefix = \"rooms/\"\npresence = true\n".getBytes(java.nio.charset.StandardCharsets.UTF_8));
    try (HeraldServer rooms = HeraldServer.start(Collections.<String, String>emptyMap(),
        Arrays.asList("--config", config.toString()))) {
      String token = ClientTokens.mint(HeraldServer.TOKEN_SECRET, "default", new ClientTokens.Claims()
          .sub("ada").channels(Collections.singletonList("rooms/*")).userInfo("{\"name\":\"Ada\"}"));
      // A long-poll's user stays a member for a while after the poll answered.
      okhttp3.Request poll = new okhttp3.Request.Builder()
          .url(rooms.url() + "/v1/poll?channel=rooms/1&presence=true&timeout=0&token=" + token).build();
      try (okhttp3.Response answer = new okhttp3.OkHttpClient().newCall(poll).execute()) {
        assertEquals(200, answer.code());
        assertTrue(answer.body().string().contains("\"event\":\"members\""));
      }
      PublisherClient p = new PublisherClient(rooms.url(), HeraldServer.API_KEY);
      ChannelPresence members = p.presence("rooms/1");
      assertEquals("rooms/1", members.channel);
      assertEquals(1, members.count);
      assertEquals("ada", members.members.get(0).user);
      assertEquals("Ada", members.members.get(0).data.get("name").getAsString());
      fails("not_found", 404, () -> p.presence("news"));
    } finally {
      java.nio.file.Files.deleteIfExists(config);
    }
  }

  @Test
  void channelsPublishingAndHistory() {
    Published first = publisher.publish("pub/chat/room-1", "{ \"title\" : \"hello\" }", "m-1");
    assertEquals(1, first.seq);
    assertEquals("m-1", first.id);
    assertFalse(first.duplicate);
    Published again = publisher.publish("pub/chat/room-1", "{\"other\":true}", "m-1");
    assertTrue(again.duplicate);
    assertEquals(1, again.seq);
    publisher.publish("pub/chat/room-1", "2");
    fails("channel_invalid", 400, () -> publisher.publish("a//b", "1"));
    fails("bad_request", 400, () -> publisher.publish("pub/x", "not json"));

    List<BatchResult> results = publisher.publishBatch(Arrays.asList(
        new BatchItem("pub/batch", "{\"n\":1}", null), new BatchItem("pub/chat/room-1", "3", "m-3")));
    assertEquals(2, results.size());
    assertEquals(1, results.get(0).published.seq);
    assertEquals(3, results.get(1).published.seq);
    HeraldException batchError = fails("channel_invalid", 400,
        () -> publisher.publishBatch(Collections.singletonList(new BatchItem("/bad", "1", null))));
    assertTrue(batchError.getMessage().startsWith("messages[0]: "), batchError.getMessage());

    ChannelInfo info = publisher.channel("pub/chat/room-1");
    assertEquals(3, info.seq);
    assertEquals(1, info.firstSeq);
    assertEquals(first.epoch, info.epoch);
    fails("channel_invalid", 400, () -> publisher.channel("a//b"));

    ChannelList page = publisher.listChannels("pub/", 1);
    assertEquals(1, page.channels.size());
    assertEquals("pub/batch", page.channels.get(0).channel);
    assertEquals("pub/batch", page.next);
    fails("bad_request", 400, () -> publisher.listChannels(null, 0));

    History history = publisher.history("pub/chat/room-1", 0, 10);
    assertEquals(3, history.messages.size());
    assertEquals("{ \"title\" : \"hello\" }", history.messages.get(0).dataJson(), "data byte for byte");
    assertEquals(1, history.firstSeq);
    History newest = publisher.historyLast("pub/chat/room-1", 1, null);
    assertEquals(1, newest.messages.size());
    assertEquals(3, newest.messages.get(0).seq());
    fails("bad_request", 400, () -> publisher.history("pub/chat/room-1", 0, 5000));
  }

  @Test
  void tokenKeysAndSecretRotation() throws Exception {
    admin.createApp("tokenkeys", null, null);
    java.security.KeyPairGenerator generator = java.security.KeyPairGenerator.getInstance("EC");
    generator.initialize(new java.security.spec.ECGenParameterSpec("secp256r1"));
    String pem = "-----BEGIN PUBLIC KEY-----\n"
        + java.util.Base64.getMimeEncoder(64, "\n".getBytes(java.nio.charset.StandardCharsets.US_ASCII))
            .encodeToString(generator.generateKeyPair().getPublic().getEncoded())
        + "\n-----END PUBLIC KEY-----\n";
    TokenKeys keys = admin.setTokenKeys("tokenkeys",
        Collections.singletonList(new PublicKey("k1", "ES256", pem)), null, null);
    assertTrue(keys.hs256);
    assertEquals("k1", keys.keys.get(0).kid);
    assertEquals(pem, admin.tokenKeys("tokenkeys").keys.get(0).pem);
    RotatedSecret rotated = admin.rotateTokenSecret("tokenkeys", 60L);
    assertTrue(rotated.tokenSecret.startsWith("hs_"));
    assertFalse(rotated.toString().contains(rotated.tokenSecret));
    assertNotNull(rotated.previousValidUntil);
    fails("bad_request", 400, () -> admin.setTokenKeys("tokenkeys",
        Collections.singletonList(new PublicKey("k2", "ES256", "junk")), null, null));
    fails("bad_request", 400, () -> admin.rotateTokenSecret("default", null));
    fails("not_found", 404, () -> admin.tokenKeys("nope"));

    // Those actions, read back from the audit log, newest first, without a secret.
    AuditPage page = admin.audit("tokenkeys", null, null, null, 3, null);
    List<String> actions = new java.util.ArrayList<>();
    for (AuditEntry entry : page.entries) {
      actions.add(entry.action + " " + entry.result);
    }
    assertEquals(Arrays.asList("token_keys.set bad_request", "token_secret.rotate ok", "token_keys.set ok"), actions);
    assertEquals("admin", page.entries.get(0).actor.role);
    assertNotNull(page.nextCursor);
    AuditPage older = admin.audit("tokenkeys", null, null, null, null, page.nextCursor);
    assertEquals("app.create", older.entries.get(0).action);
    assertFalse(new com.google.gson.Gson().toJson(page).contains(rotated.tokenSecret));
    fails("bad_request", 400, () -> admin.audit(null, null, null, null, 0, null));
  }

  @Test
  void appsKeysAndStats() {
    CreatedApp created = admin.createApp("shop", "Shop", new AppLimits().maxDevices(100L));
    assertEquals("shop", created.app.id);
    assertTrue(created.key.startsWith("hk_"));
    assertFalse(created.toString().contains(created.key), "secrets stay out of toString");
    assertFalse(created.toString().contains(created.tokenSecret));
    fails("conflict", 409, () -> admin.createApp("shop", null, null));
    fails("unauthorized", 401, () -> publisher.listApps());

    List<App> apps = admin.listApps();
    assertEquals(Arrays.asList("default", "shop"), Arrays.asList(apps.get(0).id, apps.get(1).id));
    assertEquals(Long.valueOf(100), admin.app("shop").limits.maxDevices);
    fails("not_found", 404, () -> admin.app("nope"));
    App updated = admin.updateApp("shop", new AppLimits().maxConnections(5L));
    assertNull(updated.limits.maxDevices);
    assertEquals(Long.valueOf(5), updated.limits.maxConnections);
    fails("not_found", 404, () -> admin.updateApp("nope", new AppLimits()));

    // The app's own publisher key works for its app, and sees no other.
    PublisherClient shop = new PublisherClient(server.url(), created.key);
    assertEquals("shop", shop.app("shop").id);
    fails("not_found", 404, () -> shop.app("default"));

    CreatedKey key = admin.addKey("shop", "second");
    assertFalse(key.toString().contains(key.key));
    List<KeyInfo> keys = admin.listKeys("shop");
    assertEquals(2, keys.size());
    admin.deleteKey("shop", key.keyId);
    assertEquals(1, admin.listKeys("shop").size());
    fails("not_found", 404, () -> admin.deleteKey("shop", key.keyId));
    fails("not_found", 404, () -> admin.listKeys("nope"));

    shop.publish("shop-news", "1");
    AppStats stats = shop.appStats("shop");
    assertEquals("shop", stats.app);
    assertNotNull(stats.usage);
    fails("not_found", 404, () -> shop.appStats("default"));

    admin.deleteApp("shop");
    fails("not_found", 404, () -> admin.deleteApp("shop"));
    fails("forbidden", 403, () -> admin.deleteApp("default"));
  }

  @Test
  void providersAndJobs() {
    assertTrue(publisher.listProviders("default").isEmpty());
    JsonObject webpush = new JsonObject();
    webpush.addProperty("subject", "mailto:ops@example.com");
    webpush.addProperty("generate", true);
    ProviderPublic set = publisher.setProvider("default", "webpush", webpush);
    assertEquals("webpush", set.provider);
    assertEquals(87, set.publicKey.length());
    assertEquals(set.publicKey, publisher.provider("default", "webpush").publicKey);
    assertEquals(set.publicKey, publisher.vapidPublicKey("default"));
    assertEquals(1, publisher.listProviders("default").size());
    JsonObject bad = new JsonObject();
    bad.addProperty("subject", "mailto:ops@example.com");
    bad.addProperty("private_key", "not a key");
    HeraldException e = fails("bad_request", 400, () -> publisher.setProvider("default", "webpush", bad));
    assertTrue(e.getMessage().startsWith("webpush credentials:"), e.getMessage());
    fails("not_found", 404, () -> publisher.provider("default", "herald"));
    publisher.deleteProvider("default", "webpush");
    fails("not_found", 404, () -> publisher.deleteProvider("default", "webpush"));
    fails("not_found", 404, () -> publisher.vapidPublicKey("default"));

    JobStats jobs = publisher.jobStats();
    assertEquals("default", jobs.app);
    DeadLetterList dead = publisher.deadLetters(null, 10);
    assertTrue(dead.jobs.isEmpty());
    assertNull(dead.next);
    fails("not_found", 404, () -> publisher.dropDeadLetter(999_999));
    fails("not_found", 404, () -> publisher.replayDeadLetter(999_999));
  }

  @Test
  void tokensDevicesPushesReceiptsAndAcks() {
    Device phone = publisher.registerDevice(new Registration().platform("herald").id("phone-1")
        .user("alice").tags(Arrays.asList("sports", "uk")).locale("en-GB"));
    assertEquals("phone-1", phone.id);
    assertTrue(phone.active);
    fails("tag_invalid", 400, () -> publisher.registerDevice(
        new Registration().platform("herald").id("bad-tags").tags(Collections.singletonList("AND"))));
    fails("device_invalid", 400, () -> publisher.registerDevice(new Registration().platform("herald").id("sp ace")));

    DeviceBatchResult batch = publisher.registerDevices(Arrays.asList(
        new Registration().platform("herald").id("b00").tags(Collections.singletonList("even")),
        new Registration().platform("herald").id("b01").user("alice")));
    assertEquals(2, batch.created);
    assertEquals(Arrays.asList("b00", "b01"), batch.ids);
    fails("device_invalid", 400, () -> publisher.registerDevices(
        Collections.singletonList(new Registration().platform("herald").id("sp ace"))));

    assertEquals("alice", publisher.device("phone-1").user);
    fails("not_found", 404, () -> publisher.device("missing"));
    DeviceList alices = publisher.listDevices("alice", null, null, null);
    assertEquals(2, alices.devices.size());
    DeviceList evens = publisher.listDevices(null, "even", null, null);
    assertEquals("b00", evens.devices.get(0).id);
    fails("bad_request", 400, () -> publisher.listDevices(null, null, null, 0));

    Device patched = publisher.patchDevice("b01", new DevicePatch().user(null).addTags(Arrays.asList("vip")));
    assertNull(patched.user);
    assertEquals(Collections.singletonList("vip"), patched.tags);
    fails("not_found", 404, () -> publisher.patchDevice("missing", new DevicePatch().active(false)));
    assertFalse(publisher.deactivateDevice("b01").active);
    fails("conflict", 409, () -> publisher.push(new PushRequest(PushTarget.device("b01")).data("1")));
    assertTrue(publisher.activateDevice("b01").active);
    fails("not_found", 404, () -> publisher.activateDevice("missing"));
    fails("not_found", 404, () -> publisher.deactivateDevice("missing"));
    publisher.deleteDevice("b01");
    fails("not_found", 404, () -> publisher.deleteDevice("b01"));

    MintedToken token = publisher.mintToken(new TokenRequest().sub("phone-1").device("phone-1").ttl(600L));
    assertFalse(token.toString().contains(token.token));
    assertEquals("phone-1", ClientTokens.verify(HeraldServer.TOKEN_SECRET, token.token).get("device").getAsString());
    fails("not_found", 404, () -> publisher.mintToken(new TokenRequest().device("missing")));

    PushAccepted direct = publisher.push(new PushRequest(PushTarget.device("phone-1"))
        .data("{\"n\":1}").notification(new Notification().title("hi")).ttl(3600).id("p-direct-1"));
    assertEquals("p-direct-1", direct.id);
    assertEquals(Long.valueOf(1), direct.targeted);
    assertTrue(publisher.push(new PushRequest(PushTarget.device("phone-1")).data("{\"n\":1}").id("p-direct-1")).duplicate);
    PushAccepted broadcast = publisher.push(new PushRequest(PushTarget.tags("sports AND uk")).data("2"));
    assertNull(broadcast.targeted);
    publisher.push(new PushRequest(PushTarget.user("alice")).data("3"));
    publisher.push(new PushRequest(PushTarget.app()).data("4"));
    fails("tag_expression_invalid", 400, () -> publisher.push(new PushRequest(PushTarget.tags("a AND")).data("1")));
    fails("not_found", 404, () -> publisher.push(new PushRequest(PushTarget.device("missing")).data("1")));

    Receipt receipt = publisher.receipt("p-direct-1");
    assertEquals(Long.valueOf(1), receipt.targeted);
    assertEquals(0, receipt.delivered);
    assertEquals(1, receipt.pending);
    assertEquals(1, publisher.receipt("p-direct-1", true, null, 10).targeted.longValue());
    fails("not_found", 404, () -> publisher.receipt("p-missing"));

    // The device acknowledges over HTTP with its device token.
    AckResult acked = publisher.ack(token.token, Message.DEVICE_LOG, 1, null);
    assertEquals(1, acked.device.seq);
    assertEquals(1, publisher.receipt("p-direct-1").delivered);
    AckResult byCursor = publisher.ack(token.token, acked.cursor);
    assertEquals(acked.cursor, byCursor.cursor);
    String notADevice = SubscriberTest.token("alice", 600, "x");
    fails("forbidden", 403, () -> publisher.ack(notADevice, Message.DEVICE_LOG, 1, null));
    fails("bad_request", 400, () -> publisher.ack(token.token, Message.DEVICE_LOG, 99, null));
  }
}
