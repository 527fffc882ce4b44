package dev.herald.client.model;

/** One of a device's recent pushes in its inbox view; {@code receipt} is null when it is gone. Field names are the JSON fields in camelCase. */
public final class InboxEntry {
  public String id;
  /** {@code app} or {@code device}. */
  public String log;
  public long seq;
  public long time;
  public boolean acked;
  public Receipt receipt;
}
