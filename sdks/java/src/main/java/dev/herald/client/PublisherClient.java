package dev.herald.client;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.reflect.TypeToken;
import dev.herald.client.internal.Http;
import dev.herald.client.internal.Json;
import dev.herald.client.model.AckResult;
import dev.herald.client.model.App;
import dev.herald.client.model.AppLimits;
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
import dev.herald.client.model.DeviceInbox;
import dev.herald.client.model.DeviceList;
import dev.herald.client.model.DevicePatch;
import dev.herald.client.model.History;
import dev.herald.client.model.JobStats;
import dev.herald.client.model.KeyInfo;
import dev.herald.client.model.MintedToken;
import dev.herald.client.model.Overview;
import dev.herald.client.model.ProviderPublic;
import dev.herald.client.model.PublicKey;
import dev.herald.client.model.Published;
import dev.herald.client.model.PushAccepted;
import dev.herald.client.model.PushRequest;
import dev.herald.client.model.Readiness;
import dev.herald.client.model.Receipt;
import dev.herald.client.model.Registration;
import dev.herald.client.model.ReplayedJob;
import dev.herald.client.model.RevokeRequest;
import dev.herald.client.model.Revoked;
import dev.herald.client.model.RotatedSecret;
import dev.herald.client.model.TokenKeys;
import dev.herald.client.model.TokenRequest;
import java.lang.reflect.Type;
import java.util.ArrayList;
import java.util.List;
import okhttp3.HttpUrl;
import okhttp3.OkHttpClient;

/**
 * The HTTP API of a Herald server (docs/openapi.yaml), for app backends: channels and history,
 * publishing, apps and keys (admin key), stats, revocation, the dashboard's overview, provider
 * credentials, the job queue, tokens, devices and their inbox, pushes and receipts, device acks,
 * health and readiness. Construct it with a publisher key or the admin
 * key; every call is synchronous, answers a typed result, and throws {@link HeraldException} with
 * the server's code, message, HTTP status and {@code Retry-After} on an error answer.
 */
public final class PublisherClient {
  private final Http http;

  /** A client of {@code baseUrl} ({@code http://host:port}) using {@code key} (a publisher or admin key). */
  public PublisherClient(String baseUrl, String key) {
    this(baseUrl, key, new OkHttpClient());
  }

  public PublisherClient(String baseUrl, String key, OkHttpClient client) {
    this.http = new Http(client, baseUrl, key);
  }

  private HttpUrl.Builder path(String... segments) {
    HttpUrl.Builder url = http.url();
    for (String s : segments) {
      url.addPathSegment(s);
    }
    return url;
  }

  private HttpUrl.Builder channelPath(String name, boolean messages) {
    HttpUrl.Builder url = path("v1", "channels").addPathSegments(name);
    return messages ? url.addPathSegment("messages") : url;
  }

  private <T> T get(HttpUrl.Builder url, Type type) {
    return Json.GSON.fromJson(http.call("GET", url.build(), null, null).body, type);
  }

  private <T> T send(String method, HttpUrl.Builder url, String body, Type type) {
    return Json.GSON.fromJson(http.call(method, url.build(), body, null).body, type);
  }

  private void delete(HttpUrl.Builder url) {
    http.call("DELETE", url.build(), null, null);
  }

  private static <T> List<T> listField(String body, String field, Type itemType) {
    JsonElement items = Json.parseStrict(body).getAsJsonObject().get(field);
    return Json.GSON.fromJson(items, TypeToken.getParameterized(List.class, itemType).getType());
  }

  // ---- channels and publishing ------------------------------------------------------------

  /** {@code GET /v1/channels}: channels after {@code after} (null: from the start), at most {@code limit} (null: 100). */
  public ChannelList listChannels(String after, Integer limit) {
    HttpUrl.Builder url = path("v1", "channels");
    if (after != null) {
      url.addQueryParameter("after", after);
    }
    if (limit != null) {
      url.addQueryParameter("limit", limit.toString());
    }
    return get(url, ChannelList.class);
  }

  /** {@code GET /v1/channels/{name}}. */
  public ChannelInfo channel(String name) {
    return get(channelPath(name, false), ChannelInfo.class);
  }

  /** {@code GET /v1/channels/{name}/presence}: a presence channel's members ({@code not_found} for any other channel). */
  public ChannelPresence presence(String channel) {
    return get(path("v1", "channels").addPathSegments(channel).addPathSegment("presence"), ChannelPresence.class);
  }

  /** {@code GET /v1/channels/{name}/messages?since=S}: messages after seq {@code since}, at most {@code limit} (null: 100). */
  public History history(String name, long since, Integer limit) {
    return history(name, "since", since, limit);
  }

  /** {@code GET /v1/channels/{name}/messages?last=N}: the newest {@code last} messages. */
  public History historyLast(String name, long last, Integer limit) {
    return history(name, "last", last, limit);
  }

  private History history(String name, String param, long value, Integer limit) {
    HttpUrl.Builder url = channelPath(name, true).addQueryParameter(param, Long.toUnsignedString(value));
    if (limit != null) {
      url.addQueryParameter("limit", limit.toString());
    }
    String body = http.call("GET", url.build(), null, null).body;
    History history = Json.GSON.fromJson(body, History.class);
    history.messages = new ArrayList<>();
    for (String raw : Json.elements(Json.members(body).get("messages"))) {
      history.messages.add(Message.fromJson(raw));
    }
    return history;
  }

  /** {@code POST /v1/channels/{name}/messages}: publishes {@code dataJson} (JSON text, sent byte for byte). */
  public Published publish(String channel, String dataJson) {
    return publish(channel, dataJson, null);
  }

  /** Publishes with an idempotency key ({@code Idempotency-Key}); null for none. */
  public Published publish(String channel, String dataJson, String idempotencyKey) {
    String body = "{\"data\":" + dataJson + "}";
    return Json.GSON.fromJson(
        http.call("POST", channelPath(channel, true).build(), body, idempotencyKey).body, Published.class);
  }

  /** {@code POST /v1/batch}: one result per item, in order (a channel that failed has its error). */
  public List<BatchResult> publishBatch(List<BatchItem> items) {
    StringBuilder body = new StringBuilder("{\"messages\":[");
    for (int i = 0; i < items.size(); i++) {
      BatchItem item = items.get(i);
      body.append(i == 0 ? "" : ",").append("{\"channel\":").append(ClientCommand.quote(item.channel))
          .append(",\"data\":").append(item.dataJson);
      if (item.id != null) {
        body.append(",\"id\":").append(ClientCommand.quote(item.id));
      }
      body.append('}');
    }
    body.append("]}");
    String answer = http.call("POST", path("v1", "batch").build(), body.toString(), null).body;
    List<BatchResult> out = new ArrayList<>();
    for (JsonElement result : Json.parseStrict(answer).getAsJsonObject().getAsJsonArray("results")) {
      JsonObject o = result.getAsJsonObject();
      if (o.has("error")) {
        JsonObject e = o.getAsJsonObject("error");
        out.add(new BatchResult(null, new HeraldException(
            e.get("code").getAsString(), e.get("message").getAsString(), 0, -1, null)));
      } else {
        out.add(new BatchResult(Json.GSON.fromJson(o, Published.class), null));
      }
    }
    return out;
  }

  // ---- apps, keys, stats (admin key, or the app's publisher key where the API allows) -------

  /** {@code GET /v1/apps} (admin key). */
  public List<App> listApps() {
    return listField(http.call("GET", path("v1", "apps").build(), null, null).body, "apps", App.class);
  }

  /** {@code POST /v1/apps} (admin key): {@code name} and {@code limits} may be null. */
  public CreatedApp createApp(String id, String name, AppLimits limits) {
    JsonObject body = new JsonObject();
    body.addProperty("id", id);
    if (name != null) {
      body.addProperty("name", name);
    }
    if (limits != null) {
      body.add("limits", Json.GSON.toJsonTree(limits));
    }
    return send("POST", path("v1", "apps"), body.toString(), CreatedApp.class);
  }

  /** {@code GET /v1/apps/{id}}. */
  public App app(String id) {
    return get(path("v1", "apps", id), App.class);
  }

  /** {@code PATCH /v1/apps/{id}} (admin key): replaces the app's limits. */
  public App updateApp(String id, AppLimits limits) {
    JsonObject body = new JsonObject();
    body.add("limits", Json.GSON.toJsonTree(limits == null ? new AppLimits() : limits));
    return send("PATCH", path("v1", "apps", id), body.toString(), App.class);
  }

  /** {@code DELETE /v1/apps/{id}} (admin key). */
  public void deleteApp(String id) {
    delete(path("v1", "apps", id));
  }

  /** {@code GET /v1/apps/{id}/keys} (admin key). */
  public List<KeyInfo> listKeys(String app) {
    return listField(http.call("GET", path("v1", "apps", app, "keys").build(), null, null).body, "keys", KeyInfo.class);
  }

  /** {@code POST /v1/apps/{id}/keys} (admin key); {@code label} may be null. */
  public CreatedKey addKey(String app, String label) {
    JsonObject body = new JsonObject();
    if (label != null) {
      body.addProperty("label", label);
    }
    return send("POST", path("v1", "apps", app, "keys"), body.toString(), CreatedKey.class);
  }

  /** {@code DELETE /v1/apps/{id}/keys/{key_id}} (admin key). */
  public void deleteKey(String app, String keyId) {
    delete(path("v1", "apps", app, "keys", keyId));
  }

  /** {@code GET /v1/apps/{id}/stats}. */
  public AppStats appStats(String app) {
    return get(path("v1", "apps", app, "stats"), AppStats.class);
  }

  /**
   * {@code POST /v1/apps/{id}/revoke} (admin key or the app's publisher key): ends client access as
   * {@code request} says; every closed connection is told {@code revoked}.
   */
  public Revoked revoke(String app, RevokeRequest request) {
    return send("POST", path("v1", "apps", app, "revoke"), Json.GSON.toJson(request), Revoked.class);
  }

  /** {@code GET /v1/apps/{id}/token-keys}: what verifies the app's client tokens (no secret). */
  public TokenKeys tokenKeys(String app) {
    return get(path("v1", "apps", app, "token-keys"), TokenKeys.class);
  }

  /**
   * {@code PUT /v1/apps/{id}/token-keys}: replaces the app's public keys (RS256, ES256) and JWKS
   * URL ({@code null} for none); {@code hs256 = false} drops its HS256 secret ({@code null} keeps
   * it), so only tokens its backend signs with its private keys verify.
   */
  public TokenKeys setTokenKeys(String app, List<PublicKey> keys, String jwksUrl, Boolean hs256) {
    JsonObject body = new JsonObject();
    body.add("keys", Json.GSON.toJsonTree(keys));
    if (jwksUrl != null) {
      body.addProperty("jwks_url", jwksUrl);
    }
    if (hs256 != null) {
      body.addProperty("hs256", hs256);
    }
    return send("PUT", path("v1", "apps", app, "token-keys"), body.toString(), TokenKeys.class);
  }

  /**
   * {@code POST /v1/apps/{id}/token-secret}: a new HS256 token secret (shown once); the old one
   * keeps verifying tokens for {@code overlapSeconds} ({@code null}: the server's default, an
   * hour; 0: none), then its connections are closed.
   */
  public RotatedSecret rotateTokenSecret(String app, Long overlapSeconds) {
    JsonObject body = new JsonObject();
    if (overlapSeconds != null) {
      body.addProperty("overlap", overlapSeconds);
    }
    return send("POST", path("v1", "apps", app, "token-secret"), body.toString(), RotatedSecret.class);
  }

  /**
   * {@code GET /v1/audit}: the audit log of admin actions, newest first (every app's with the admin
   * key, the key's own app's with a publisher key). Each filter may be null; {@code since} and
   * {@code until} are ms since the Unix epoch; {@code cursor} is the previous page's
   * {@code nextCursor}.
   */
  public AuditPage audit(String app, String action, Long since, Long until, Integer limit, String cursor) {
    HttpUrl.Builder url = path("v1", "audit");
    String[][] query = {
      {"app", app},
      {"action", action},
      {"since", since == null ? null : since.toString()},
      {"until", until == null ? null : until.toString()},
      {"limit", limit == null ? null : limit.toString()},
      {"cursor", cursor},
    };
    for (String[] pair : query) {
      if (pair[1] != null) {
        url.addQueryParameter(pair[0], pair[1]);
      }
    }
    return get(url, AuditPage.class);
  }

  /** {@code GET /v1/overview}: the dashboard's live figures (the server's only with the admin key). */
  public Overview overview() {
    return get(path("v1", "overview"), Overview.class);
  }

  // ---- provider credentials and jobs --------------------------------------------------------

  /** {@code GET /v1/apps/{id}/providers}. */
  public List<ProviderPublic> listProviders(String app) {
    return listField(http.call("GET", path("v1", "apps", app, "providers").build(), null, null).body,
        "providers", ProviderPublic.class);
  }

  /** {@code GET /v1/apps/{id}/providers/{provider}}. */
  public ProviderPublic provider(String app, String provider) {
    return get(path("v1", "apps", app, "providers", provider), ProviderPublic.class);
  }

  /** {@code PUT /v1/apps/{id}/providers/{provider}}: credentials as docs/openapi.yaml shapes them. */
  public ProviderPublic setProvider(String app, String provider, JsonObject credentials) {
    return send("PUT", path("v1", "apps", app, "providers", provider), credentials.toString(), ProviderPublic.class);
  }

  /** {@code DELETE /v1/apps/{id}/providers/{provider}}. */
  public void deleteProvider(String app, String provider) {
    delete(path("v1", "apps", app, "providers", provider));
  }

  /** {@code GET /v1/apps/{id}/vapid-public-key} (no credentials needed): base64url. */
  public String vapidPublicKey(String app) {
    String body = http.call("GET", path("v1", "apps", app, "vapid-public-key").build(), null, null, null).body;
    return Json.parseStrict(body).getAsJsonObject().get("public_key").getAsString();
  }

  /** {@code GET /v1/jobs/stats}. */
  public JobStats jobStats() {
    return get(path("v1", "jobs", "stats"), JobStats.class);
  }

  /** {@code GET /v1/jobs/dead}: dead letters after job id {@code after} (null: from the start). */
  public DeadLetterList deadLetters(Long after, Integer limit) {
    HttpUrl.Builder url = path("v1", "jobs", "dead");
    if (after != null) {
      url.addQueryParameter("after", after.toString());
    }
    if (limit != null) {
      url.addQueryParameter("limit", limit.toString());
    }
    return get(url, DeadLetterList.class);
  }

  /** {@code DELETE /v1/jobs/{id}}. */
  public void dropDeadLetter(long id) {
    delete(path("v1", "jobs", Long.toString(id)));
  }

  /** {@code POST /v1/jobs/{id}/replay}. */
  public ReplayedJob replayDeadLetter(long id) {
    return send("POST", path("v1", "jobs", Long.toString(id), "replay"), null, ReplayedJob.class);
  }

  // ---- tokens, devices, pushes, acks --------------------------------------------------------

  /** {@code POST /v1/tokens}: a client (or, with {@code device}, device) token of the key's app. */
  public MintedToken mintToken(TokenRequest request) {
    return send("POST", path("v1", "tokens"), Json.GSON.toJson(request), MintedToken.class);
  }

  /** {@code GET /v1/devices}: {@code user} or {@code tag} (or neither) filter; nulls are left out. */
  public DeviceList listDevices(String user, String tag, String after, Integer limit) {
    HttpUrl.Builder url = path("v1", "devices");
    String[][] params = {{"user", user}, {"tag", tag}, {"after", after}, {"limit", limit == null ? null : limit.toString()}};
    for (String[] p : params) {
      if (p[1] != null) {
        url.addQueryParameter(p[0], p[1]);
      }
    }
    return get(url, DeviceList.class);
  }

  /** {@code POST /v1/devices}: registers (or re-registers) a device. */
  public Device registerDevice(Registration registration) {
    return send("POST", path("v1", "devices"), Json.GSON.toJson(registration), Device.class);
  }

  /** {@code POST /v1/devices/batch}. */
  public DeviceBatchResult registerDevices(List<Registration> registrations) {
    JsonObject body = new JsonObject();
    body.add("devices", Json.GSON.toJsonTree(registrations));
    return send("POST", path("v1", "devices", "batch"), body.toString(), DeviceBatchResult.class);
  }

  /** {@code GET /v1/devices/{id}}. */
  public Device device(String id) {
    return get(path("v1", "devices", id), Device.class);
  }

  /** {@code GET /v1/devices/{id}/inbox}: acknowledged positions, heads and recent pushes. */
  public DeviceInbox deviceInbox(String id) {
    return get(path("v1", "devices", id, "inbox"), DeviceInbox.class);
  }

  /** {@code PATCH /v1/devices/{id}}. */
  public Device patchDevice(String id, DevicePatch patch) {
    return send("PATCH", path("v1", "devices", id), patch.toJson(), Device.class);
  }

  /** {@code DELETE /v1/devices/{id}}. */
  public void deleteDevice(String id) {
    delete(path("v1", "devices", id));
  }

  /** {@code POST /v1/devices/{id}/activate}. */
  public Device activateDevice(String id) {
    return send("POST", path("v1", "devices", id, "activate"), null, Device.class);
  }

  /** {@code POST /v1/devices/{id}/deactivate}. */
  public Device deactivateDevice(String id) {
    return send("POST", path("v1", "devices", id, "deactivate"), null, Device.class);
  }

  /** {@code POST /v1/push}. The request's {@code id} is the idempotency key. */
  public PushAccepted push(PushRequest request) {
    String rest = Json.GSON.toJson(request);
    String body = request.dataJson == null ? rest
        : "{\"data\":" + request.dataJson + (rest.equals("{}") ? "}" : "," + rest.substring(1));
    return send("POST", path("v1", "push"), body, PushAccepted.class);
  }

  /** {@code GET /v1/push/{id}}: the receipt; with {@code devices}, each device's provider result. */
  public Receipt receipt(String pushId, boolean devices, String after, Integer limit) {
    HttpUrl.Builder url = path("v1", "push", pushId);
    if (devices) {
      url.addQueryParameter("devices", "true");
    }
    if (after != null) {
      url.addQueryParameter("after", after);
    }
    if (limit != null) {
      url.addQueryParameter("limit", limit.toString());
    }
    return get(url, Receipt.class);
  }

  /** {@code GET /v1/push/{id}}. */
  public Receipt receipt(String pushId) {
    return receipt(pushId, false, null, null);
  }

  /** {@code POST /v1/ack} with a device token: acknowledges an inbox cursor string ({@code $app} position first). */
  public AckResult ack(String deviceToken, String cursor) {
    JsonObject body = new JsonObject();
    body.addProperty("cursor", cursor);
    return Json.GSON.fromJson(
        http.call("POST", path("v1", "ack").build(), body.toString(), null, deviceToken).body, AckResult.class);
  }

  /** {@code POST /v1/ack} with a device token: acknowledges one log up to {@code seq}; {@code epoch} may be null. */
  public AckResult ack(String deviceToken, String log, long seq, String epoch) {
    String body = ClientCommand.ack(null, log, seq, epoch);
    body = body.substring("{\"ack\":".length(), body.length() - 1);
    return Json.GSON.fromJson(
        http.call("POST", path("v1", "ack").build(), body, null, deviceToken).body, AckResult.class);
  }

  // ---- operations ---------------------------------------------------------------------------

  /** {@code GET /healthz}: the status ({@code "ok"}). */
  public String health() {
    String body = http.call("GET", path("healthz").build(), null, null, null).body;
    return Json.parseStrict(body).getAsJsonObject().get("status").getAsString();
  }

  /**
   * {@code GET /readyz}, readiness: the store takes writes, the bus is connected, the server is not
   * draining. A node that is not ready ({@code 503}) throws {@link NotReadyException}, whose
   * message names each failing check with its error and which carries the whole answer.
   */
  public Readiness ready() {
    Http.Answer answer = http.call("GET", path("readyz").build(), null, null, null, 503);
    Readiness readiness = null;
    try {
      readiness = Json.GSON.fromJson(answer.body, Readiness.class);
    } catch (RuntimeException notReadiness) {
      // Below: a 503 that is not Herald's answer (a proxy's page) is an HTTP error like any other.
    }
    if (answer.status == 503) {
      if (readiness == null || readiness.checks == null) {
        String message = answer.body.isEmpty() ? "HTTP 503" : answer.body;
        throw new HeraldException(null, message, 503, -1, null);
      }
      throw new NotReadyException(readiness);
    }
    return readiness;
  }

  /** {@code GET /metrics}: the Prometheus text. */
  public String metrics() {
    return http.call("GET", path("metrics").build(), null, null, null).body;
  }

  /** {@code GET /v1/openapi.yaml}: the API document the server implements. */
  public String openapi() {
    return http.call("GET", path("v1", "openapi.yaml").build(), null, null, null).body;
  }
}
