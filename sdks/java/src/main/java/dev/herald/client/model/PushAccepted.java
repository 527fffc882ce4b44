package dev.herald.client.model;

/** A stored push: its id, the devices it targets (null for tag and app pushes until counted), whether it was a duplicate. Field names are the JSON fields in camelCase. */
public final class PushAccepted {
  public String id;
  public Long targeted;
  public boolean duplicate;
}
