package dev.herald.client.model;

import java.util.List;
import java.util.Map;

/** What {@code POST /v1/tokens} mints: all optional; {@code ttl} in seconds. Field names are the JSON fields in camelCase. */
public final class TokenRequest {
  public String sub;
  public String device;
  public List<String> channels;
  public List<String> publish;
  public Long ttl;
  /** The token's id ({@code jti} claim), to revoke it by; the server also sets {@code iat}. */
  public String jti;
  /**
   * The token's {@code user_info} claim: what presence channels show of the user (a JSON object of
   * at most 1,024 bytes).
   */
  public Map<String, Object> userInfo;

  public TokenRequest sub(String sub) {
    this.sub = sub;
    return this;
  }

  public TokenRequest device(String device) {
    this.device = device;
    return this;
  }

  public TokenRequest channels(List<String> channels) {
    this.channels = channels;
    return this;
  }

  public TokenRequest publish(List<String> publish) {
    this.publish = publish;
    return this;
  }

  public TokenRequest ttl(Long ttl) {
    this.ttl = ttl;
    return this;
  }

  public TokenRequest jti(String jti) {
    this.jti = jti;
    return this;
  }

  public TokenRequest userInfo(Map<String, Object> userInfo) {
    this.userInfo = userInfo;
    return this;
  }
}
