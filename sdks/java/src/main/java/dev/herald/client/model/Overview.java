package dev.herald.client.model;

import java.util.List;

/**
 * {@code GET /v1/overview}, the dashboard's live figures: with the admin key {@code server} and every
 * app; with a publisher key {@code server} is null and {@code apps} holds its app only. Field names
 * are the JSON fields in camelCase.
 */
public final class Overview {
  /** {@code admin} or {@code publisher}. */
  public String role;
  public long timeMs;
  public ServerFigures server;
  public List<AppOverview> apps;
}
