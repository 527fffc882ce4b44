package dev.herald.client.model;

/** What one app may use; a null limit is unlimited. Field names are the JSON fields in camelCase. */
public final class AppLimits {
  public Long maxDevices;
  public Long maxConnections;
  public Long maxMessageBytes;
  public Long ackWindowMs;

  public AppLimits maxDevices(Long maxDevices) {
    this.maxDevices = maxDevices;
    return this;
  }

  public AppLimits maxConnections(Long maxConnections) {
    this.maxConnections = maxConnections;
    return this;
  }

  public AppLimits maxMessageBytes(Long maxMessageBytes) {
    this.maxMessageBytes = maxMessageBytes;
    return this;
  }

  public AppLimits ackWindowMs(Long ackWindowMs) {
    this.ackWindowMs = ackWindowMs;
    return this;
  }
}
