package dev.herald.client.model;

/** A stored message (or, with {@code duplicate}, the one stored earlier under the same id). Field names are the JSON fields in camelCase. */
public final class Published {
  public String channel;
  public long seq;
  public String id;
  public String epoch;
  public long time;
  public boolean duplicate;
}
