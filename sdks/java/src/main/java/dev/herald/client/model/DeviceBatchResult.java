package dev.herald.client.model;

import java.util.List;

/** What a batch registration did: counts, and the id of each registration in order. Field names are the JSON fields in camelCase. */
public final class DeviceBatchResult {
  public long created;
  public long updated;
  public List<String> ids;
}
