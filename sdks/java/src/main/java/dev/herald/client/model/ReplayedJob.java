package dev.herald.client.model;

/** A dead letter queued again. Field names are the JSON fields in camelCase. */
public final class ReplayedJob {
  public long id;
  public String state;
}
