package dev.herald.client.internal;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import dev.herald.client.HeraldException;
import java.io.IOException;
import okhttp3.HttpUrl;
import okhttp3.MediaType;
import okhttp3.OkHttpClient;
import okhttp3.Request;
import okhttp3.RequestBody;
import okhttp3.Response;
import okhttp3.ResponseBody;

/**
 * Runs one HTTP request of the publisher API and turns a non-2xx answer into a
 * {@link HeraldException} with the server's code, message, status and {@code Retry-After}. The
 * credential is sent as {@code Authorization: Bearer} and never appears in an error. Not part of
 * the public API.
 */
public final class Http {
  private static final MediaType JSON = MediaType.get("application/json");

  private final OkHttpClient client;
  private final HttpUrl base;
  private final String bearer;

  public Http(OkHttpClient client, String baseUrl, String bearer) {
    this.client = client;
    HttpUrl parsed = HttpUrl.parse(baseUrl);
    if (parsed == null) {
      throw new IllegalArgumentException("not an http(s) URL: " + baseUrl);
    }
    this.base = parsed;
    this.bearer = bearer;
  }

  /** A URL builder at the server's root. */
  public HttpUrl.Builder url() {
    return base.newBuilder();
  }

  /** The answer of a request: status and body text. */
  public static final class Answer {
    public final int status;
    public final String body;

    Answer(int status, String body) {
      this.status = status;
      this.body = body;
    }
  }

  /** Sends a request (body {@code null} for none) with the client's credential. */
  public Answer call(String method, HttpUrl url, String jsonBody, String idempotencyKey) {
    return call(method, url, jsonBody, idempotencyKey, bearer);
  }

  /** Sends a request with another credential (a device token for {@code /v1/ack}). */
  public Answer call(String method, HttpUrl url, String jsonBody, String idempotencyKey, String credential) {
    return call(method, url, jsonBody, idempotencyKey, credential, 0);
  }

  /**
   * As {@link #call(String, HttpUrl, String, String, String)}, answering rather than throwing
   * when the status is {@code alsoAnswered} (a {@code 503} whose body is not an error: {@code /readyz}).
   */
  public Answer call(String method, HttpUrl url, String jsonBody, String idempotencyKey, String credential,
      int alsoAnswered) {
    Request.Builder request = new Request.Builder().url(url);
    if (credential != null) {
      request.header("Authorization", "Bearer " + credential);
    }
    if (idempotencyKey != null) {
      request.header("Idempotency-Key", idempotencyKey);
    }
    RequestBody body = jsonBody == null
        ? ("GET".equals(method) || "DELETE".equals(method) ? null : RequestBody.create(new byte[0], null))
        : RequestBody.create(jsonBody, JSON);
    request.method(method, body);
    try (Response response = client.newCall(request.build()).execute()) {
      ResponseBody responseBody = response.body();
      String text = responseBody == null ? "" : responseBody.string();
      if (!response.isSuccessful() && response.code() != alsoAnswered) {
        throw error(response, text);
      }
      return new Answer(response.code(), text);
    } catch (IOException e) {
      throw new HeraldException(method + " " + url.encodedPath() + " failed: " + e.getMessage(), e);
    }
  }

  private static HeraldException error(Response response, String text) {
    long retryAfter = -1;
    String header = response.header("Retry-After");
    if (header != null) {
      try {
        retryAfter = Long.parseLong(header.trim());
      } catch (NumberFormatException ignored) {
        retryAfter = -1;
      }
    }
    String code = null;
    String message = text.isEmpty() ? "HTTP " + response.code() : text;
    try {
      JsonElement parsed = Json.parseStrict(text);
      JsonObject error = parsed.getAsJsonObject().getAsJsonObject("error");
      code = error.get("code").getAsString();
      message = error.get("message").getAsString();
    } catch (RuntimeException notAnErrorBody) {
      // A plain-text answer (a proxy, or a path parameter the router refuses): no code.
    }
    return new HeraldException(code, message, response.code(), retryAfter, null);
  }
}
