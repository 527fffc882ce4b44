package dev.herald.client.model;

import java.util.Map;

/** This process's figures in the overview (admin key only), cumulative since it started. Field names are the JSON fields in camelCase. */
public final class ServerFigures {
  /** Open connections per transport ({@code ws}, {@code sse}, {@code meteor}, {@code meteor_control}, {@code pusher}, {@code mqtt}; parked ones included). */
  public Map<String, Long> connections;
  public long subscriptions;
  public long published;
  public long deliveries;
  /** Messages written per transport ({@code ws}, {@code sse}, {@code poll}, {@code meteor}, {@code pusher}, {@code mqtt}). */
  public Map<String, Long> written;
  public long slowConsumerDisconnects;
  public Histogram deliveryLag;
  public Histogram publishLatency;
}
