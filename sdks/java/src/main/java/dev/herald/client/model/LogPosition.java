package dev.herald.client.model;

/** A position in one inbox log. Field names are the JSON fields in camelCase. */
public final class LogPosition {
  public String epoch;
  public long seq;
}
