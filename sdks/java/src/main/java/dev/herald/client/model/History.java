package dev.herald.client.model;

import dev.herald.client.Message;
import java.util.List;

/** A page of a channel's history and the channel's state at the time of the read. */
public final class History {
  public String channel;
  public String epoch;
  public long seq;
  public long firstSeq;
  /** Oldest first; each message's data byte for byte. */
  public transient List<Message> messages;
}
