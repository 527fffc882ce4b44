package dev.herald.client.model;

import java.util.Map;

/** The key's app's provider figures, by provider ({@code apns}, {@code fcm}, {@code webpush}, {@code expand}). Field names are the JSON fields in camelCase. */
public final class JobStats {
  public String app;
  public Map<String, ProviderFigures> providers;
}
