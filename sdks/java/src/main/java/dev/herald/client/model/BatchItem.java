package dev.herald.client.model;

/** One message of a batch publish: channel, data (JSON text, sent as is) and optional idempotency key. */
public final class BatchItem {
  public final String channel;
  public final String dataJson;
  public final String id;

  public BatchItem(String channel, String dataJson, String id) {
    this.channel = channel;
    this.dataJson = dataJson;
    this.id = id;
  }
}
