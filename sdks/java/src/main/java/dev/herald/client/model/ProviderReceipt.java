package dev.herald.client.model;

import java.util.Map;

/** A push's provider jobs by outcome. Field names are the JSON fields in camelCase. */
public final class ProviderReceipt {
  public long queued;
  public long live;
  public long sent;
  public long accepted;
  public Map<String, Long> failed;
  public Map<String, Long> skipped;
  public long dead;
  public long inDoubt;
  public boolean expanding;
}
