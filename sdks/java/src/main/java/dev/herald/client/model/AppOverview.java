package dev.herald.client.model;

import java.util.Map;

/** One app in the overview: usage, live connections on this node, devices, limits, provider figures. Field names are the JSON fields in camelCase. */
public final class AppOverview {
  public String app;
  public String name;
  public long connections;
  public Usage usage;
  public long devices;
  public AppLimits limits;
  public Map<String, ProviderFigures> providers;
}
