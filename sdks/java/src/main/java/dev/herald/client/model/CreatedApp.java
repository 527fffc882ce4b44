package dev.herald.client.model;

/**
 * A new app with its first publisher key and its client-token secret, shown only in this answer.
 * {@link #toString()} never prints the key or the secret.
 */
public final class CreatedApp {
  public App app;
  public String key;
  public String keyId;
  public String tokenSecret;

  @Override
  public String toString() {
    return "CreatedApp[app=" + (app == null ? null : app.id) + ", keyId=" + keyId + ", key=<hidden>, tokenSecret=<hidden>]";
  }
}
