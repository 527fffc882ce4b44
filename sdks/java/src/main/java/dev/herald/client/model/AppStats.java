package dev.herald.client.model;

import java.util.Map;

/** An app's usage, device count, limits and provider figures. Field names are the JSON fields in camelCase. */
public final class AppStats {
  public String app;
  public Usage usage;
  public long devices;
  public AppLimits limits;
  public Map<String, ProviderFigures> providers;
}
