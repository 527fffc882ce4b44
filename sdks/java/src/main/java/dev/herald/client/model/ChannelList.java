package dev.herald.client.model;

import java.util.List;

/** A page of channels; {@code next} is the name to pass as {@code after}, or null on the last page. Field names are the JSON fields in camelCase. */
public final class ChannelList {
  public List<ChannelInfo> channels;
  public String next;
}
