package dev.herald.client.model;

/**
 * An app's new HS256 token secret, shown only in this answer, and until when the previous one
 * still verifies tokens. {@link #toString()} never prints the secret.
 */
public final class RotatedSecret {
  public String app;
  public String tokenSecret;
  public Long previousValidUntil;

  @Override
  public String toString() {
    return "RotatedSecret[app=" + app + ", previousValidUntil=" + previousValidUntil
        + ", tokenSecret=<hidden>]";
  }
}
