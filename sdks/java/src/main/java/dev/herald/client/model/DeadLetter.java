package dev.herald.client.model;

/** A provider job that failed all its attempts. Field names are the JSON fields in camelCase. */
public final class DeadLetter {
  public long id;
  public String push;
  public String kind;
  public String provider;
  public String device;
  public int attempts;
  public String reason;
  public long died;
}
