package dev.herald.client.model;

import java.util.List;

/** A registered device. Field names are the JSON fields in camelCase. */
public final class Device {
  public String id;
  public String platform;
  public String token;
  public WebPushKeys keys;
  public String user;
  public List<String> tags;
  public String locale;
  public boolean active;
  public String inactiveReason;
  public long created;
  public long updated;
}
