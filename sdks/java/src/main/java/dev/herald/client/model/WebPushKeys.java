package dev.herald.client.model;

/** A Web Push subscription's keys (base64url). Field names are the JSON fields in camelCase. */
public final class WebPushKeys {
  public String p256dh;
  public String auth;
}
