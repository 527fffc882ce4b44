package dev.herald.client.model;

/** A minted client token and its expiry (seconds since the Unix epoch). Keep the token out of logs. Field names are the JSON fields in camelCase. */
public final class MintedToken {
  public String token;
  public long expires;

  @Override
  public String toString() {
    return "MintedToken[expires=" + expires + ", token=<hidden>]";
  }
}
