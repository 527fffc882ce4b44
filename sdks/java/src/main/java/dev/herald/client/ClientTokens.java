package dev.herald.client;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import dev.herald.client.internal.Json;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.util.Base64;
import java.util.List;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * Client tokens (docs/protocol.md section 3), for an app backend that mints them itself instead of
 * calling {@code POST /v1/tokens}: HS256 over the app's token secret, header
 * {@code {"typ":"JWT","alg":"HS256"}} plus {@code "kid"} for an app other than {@code default}, claims
 * in the order {@code sub, exp, channels, publish, device, iat, jti, user_info}, empty ones left out. Minting is
 * deterministic. Never log a secret or a token.
 */
public final class ClientTokens {
  private ClientTokens() {}

  /** The claims of a client token; null or empty fields are left out. */
  public static final class Claims {
    public String sub;
    /** Expiry, seconds since the Unix epoch. */
    public Long exp;
    public List<String> channels;
    public List<String> publish;
    /** A device id: the token is a device token. */
    public String device;
    /** Issued at, seconds since the Unix epoch (a revocation by issue time compares it). */
    public Long iat;
    /** The token's id (1 to 128 printable ASCII characters), to revoke it by. */
    public String jti;
    /** What presence channels show of the user (its member data): a JSON object's text. */
    public String userInfo;

    public Claims sub(String sub) {
      this.sub = sub;
      return this;
    }

    public Claims exp(long exp) {
      this.exp = exp;
      return this;
    }

    public Claims channels(List<String> channels) {
      this.channels = channels;
      return this;
    }

    public Claims publish(List<String> publish) {
      this.publish = publish;
      return this;
    }

    public Claims device(String device) {
      this.device = device;
      return this;
    }

    public Claims iat(long iat) {
      this.iat = iat;
      return this;
    }

    public Claims jti(String jti) {
      this.jti = jti;
      return this;
    }

    /** Sets {@code user_info}, a JSON object's text, written into the token as it is. */
    public Claims userInfo(String userInfo) {
      this.userInfo = userInfo;
      return this;
    }

    /** The claims as the compact JSON a token carries. */
    public String toJson() {
      StringBuilder s = new StringBuilder("{");
      if (sub != null && !sub.isEmpty()) {
        field(s, "sub").append(ClientCommand.quote(sub));
      }
      if (exp != null) {
        field(s, "exp").append(exp.longValue());
      }
      if (channels != null && !channels.isEmpty()) {
        field(s, "channels").append(Json.GSON.toJson(channels));
      }
      if (publish != null && !publish.isEmpty()) {
        field(s, "publish").append(Json.GSON.toJson(publish));
      }
      if (device != null && !device.isEmpty()) {
        field(s, "device").append(ClientCommand.quote(device));
      }
      if (iat != null) {
        field(s, "iat").append(iat.longValue());
      }
      if (jti != null && !jti.isEmpty()) {
        field(s, "jti").append(ClientCommand.quote(jti));
      }
      if (userInfo != null && !userInfo.isEmpty()) {
        field(s, "user_info").append(userInfo);
      }
      return s.append('}').toString();
    }

    private static StringBuilder field(StringBuilder s, String name) {
      if (s.length() > 1) {
        s.append(',');
      }
      return s.append('"').append(name).append("\":");
    }
  }

  /** Mints a token of app {@code app} ({@code "default"} for a one-app server) signed with {@code secret}. */
  public static String mint(String secret, String app, Claims claims) {
    String header = "default".equals(app)
        ? "{\"typ\":\"JWT\",\"alg\":\"HS256\"}"
        : "{\"typ\":\"JWT\",\"alg\":\"HS256\",\"kid\":" + ClientCommand.quote(app) + "}";
    String signingInput = b64(header.getBytes(StandardCharsets.UTF_8)) + "."
        + b64(claims.toJson().getBytes(StandardCharsets.UTF_8));
    return signingInput + "." + b64(hmac(secret, signingInput));
  }

  /**
   * Checks the signature with {@code secret} and answers the claims object. Expiry is not checked
   * here (the server does).
   *
   * @throws HeraldException {@code unauthorized} for a token that is malformed or signed otherwise
   */
  public static JsonObject verify(String secret, String token) {
    String[] parts = token.split("\\.", -1);
    if (parts.length != 3) {
      throw unauthorized("not a JWT");
    }
    try {
      JsonElement header = Json.parseStrict(utf8(parts[0]));
      if (!header.isJsonObject() || !"HS256".equals(header.getAsJsonObject().get("alg").getAsString())) {
        throw unauthorized("not an HS256 token");
      }
      byte[] expected = hmac(secret, parts[0] + "." + parts[1]);
      if (!MessageDigest.isEqual(expected, Base64.getUrlDecoder().decode(parts[2]))) {
        throw unauthorized("bad signature");
      }
      JsonElement claims = Json.parseStrict(utf8(parts[1]));
      if (!claims.isJsonObject()) {
        throw unauthorized("the claims are not an object");
      }
      return claims.getAsJsonObject();
    } catch (HeraldException e) {
      throw e;
    } catch (RuntimeException e) {
      throw unauthorized("malformed token");
    }
  }

  private static String utf8(String b64) {
    return new String(Base64.getUrlDecoder().decode(b64), StandardCharsets.UTF_8);
  }

  private static HeraldException unauthorized(String message) {
    return new HeraldException(ErrorCode.UNAUTHORIZED.wire(), message, 401, -1, null);
  }

  private static String b64(byte[] bytes) {
    return Base64.getUrlEncoder().withoutPadding().encodeToString(bytes);
  }

  private static byte[] hmac(String secret, String input) {
    try {
      Mac mac = Mac.getInstance("HmacSHA256");
      mac.init(new SecretKeySpec(secret.getBytes(StandardCharsets.UTF_8), "HmacSHA256"));
      return mac.doFinal(input.getBytes(StandardCharsets.UTF_8));
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException("HmacSHA256 is not available", e);
    }
  }
}
