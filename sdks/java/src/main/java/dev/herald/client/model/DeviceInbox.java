package dev.herald.client.model;

import java.util.List;

/**
 * {@code GET /v1/devices/{id}/inbox}: the device's acknowledged positions ({@code cursor} as the
 * store keeps it, {@code EPOCH:SEQ,EPOCH:SEQ}), each log's head, and its 10 newest pushes, newest
 * first. Field names are the JSON fields in camelCase.
 */
public final class DeviceInbox {
  public String device;
  public String cursor;
  public InboxLogPosition appLog;
  public InboxLogPosition deviceLog;
  public List<InboxEntry> recent;
}
