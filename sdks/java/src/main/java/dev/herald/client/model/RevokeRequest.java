package dev.herald.client.model;

/**
 * What {@code POST /v1/apps/{id}/revoke} ends: exactly one kind, made by the factory methods. Field
 * names are the JSON fields in camelCase; unset ones are left out.
 */
public final class RevokeRequest {
  public Boolean all;
  public String sub;
  public String device;
  public String jti;
  /** With {@code jti} only: until when (seconds since the Unix epoch) the token is refused. */
  public Long expires;
  public Long issuedBefore;

  private RevokeRequest() {}

  /** Closes every connection of the app (nothing stored: clients may connect again). */
  public static RevokeRequest all() {
    RevokeRequest r = new RevokeRequest();
    r.all = Boolean.TRUE;
    return r;
  }

  /** Closes the connections whose token has this {@code sub} (nothing stored). */
  public static RevokeRequest sub(String sub) {
    RevokeRequest r = new RevokeRequest();
    r.sub = sub;
    return r;
  }

  /** Closes the connections whose token names this device (nothing stored). */
  public static RevokeRequest device(String device) {
    RevokeRequest r = new RevokeRequest();
    r.device = device;
    return r;
  }

  /** Refuses the token with this {@code jti} (for the server's default of 30 days) and closes its connections. */
  public static RevokeRequest jti(String jti) {
    RevokeRequest r = new RevokeRequest();
    r.jti = jti;
    return r;
  }

  /** Refuses the token with this {@code jti} until {@code expires} (give the token's {@code exp}). */
  public static RevokeRequest jti(String jti, long expires) {
    RevokeRequest r = jti(jti);
    r.expires = expires;
    return r;
  }

  /** Refuses every token of the app issued before {@code seconds} (and every token without {@code iat}). */
  public static RevokeRequest issuedBefore(long seconds) {
    RevokeRequest r = new RevokeRequest();
    r.issuedBefore = seconds;
    return r;
  }
}
