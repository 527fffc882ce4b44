package dev.herald.client.model;

/** An app (tenant). Field names are the JSON fields in camelCase. */
public final class App {
  public String id;
  public String name;
  public AppLimits limits;
  public long created;
}
