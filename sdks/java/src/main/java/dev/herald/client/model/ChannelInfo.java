package dev.herald.client.model;

/** A channel's state: epoch, newest seq, oldest retained seq, live subscribers on this server. Field names are the JSON fields in camelCase. */
public final class ChannelInfo {
  public String channel;
  public String epoch;
  public long seq;
  public long firstSeq;
  public long subscribers;
}
