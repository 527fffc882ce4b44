package dev.herald.client.model;

import java.util.Map;

/** One provider's worker figures (this server's, since it started) and queue depth; absent parts are null. Field names are the JSON fields in camelCase. */
public final class ProviderFigures {
  public Long sends;
  public Long successes;
  public Map<String, Long> failures;
  public Long retries;
  public Double avgMs;
  public Double p95Ms;
  public Long queued;
  public Long dead;
  public Long oldestAgeMs;
}
