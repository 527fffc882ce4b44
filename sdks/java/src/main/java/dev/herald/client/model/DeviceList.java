package dev.herald.client.model;

import java.util.List;

/** A page of devices; {@code next} is the id to pass as {@code after}, or null. Field names are the JSON fields in camelCase. */
public final class DeviceList {
  public List<Device> devices;
  public String next;
}
