package dev.herald.client.model;

/** One inbox log of a device: the position it acknowledged, the log's head, and how many lie between. Field names are the JSON fields in camelCase. */
public final class InboxLogPosition {
  public LogPosition acked;
  public LogPosition head;
  public long unacked;
}
