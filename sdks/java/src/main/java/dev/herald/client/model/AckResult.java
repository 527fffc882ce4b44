package dev.herald.client.model;

/** A device's acknowledged inbox cursor after an ack. Field names are the JSON fields in camelCase. */
public final class AckResult {
  public String cursor;
  public LogPosition app;
  public LogPosition device;
}
