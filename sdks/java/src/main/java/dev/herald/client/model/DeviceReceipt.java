package dev.herald.client.model;

/** One device's provider result for a push. Field names are the JSON fields in camelCase. */
public final class DeviceReceipt {
  public String device;
  public String provider;
  public String state;
  public String result;
  public int attempts;
  public boolean inDoubt;
}
