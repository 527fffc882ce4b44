package dev.herald.client.model;

import java.util.List;

/** What became of a push. Field names are the JSON fields in camelCase. */
public final class Receipt {
  public String id;
  public Long targeted;
  public long delivered;
  public long pending;
  public long expired;
  public long created;
  public long expires;
  public String delivery;
  public ProviderReceipt providers;
  public List<DeviceReceipt> devices;
}
