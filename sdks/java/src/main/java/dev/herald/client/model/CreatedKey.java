package dev.herald.client.model;

/** A new publisher key, shown only in this answer. {@link #toString()} never prints the key. */
public final class CreatedKey {
  public String key;
  public String keyId;
  public String label;

  @Override
  public String toString() {
    return "CreatedKey[keyId=" + keyId + ", label=" + label + ", key=<hidden>]";
  }
}
