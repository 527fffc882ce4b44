package dev.herald.client.model;

/** A publisher key as listed: its key id, never the key. Field names are the JSON fields in camelCase. */
public final class KeyInfo {
  public String app;
  public String id;
  public String label;
  public long created;
}
