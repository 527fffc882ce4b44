package dev.herald.client.model;

/** An app's usage counters since it was created. Field names are the JSON fields in camelCase. */
public final class Usage {
  public long published;
  public long deliveries;
  public long acks;
  public long peakConnections;
}
