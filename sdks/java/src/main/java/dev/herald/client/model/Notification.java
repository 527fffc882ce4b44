package dev.herald.client.model;

/** A push's notification (title, body, badge, sound), all optional. Field names are the JSON fields in camelCase. */
public final class Notification {
  public String title;
  public String body;
  public Long badge;
  public String sound;

  public Notification title(String title) {
    this.title = title;
    return this;
  }

  public Notification body(String body) {
    this.body = body;
    return this;
  }

  public Notification badge(Long badge) {
    this.badge = badge;
    return this;
  }

  public Notification sound(String sound) {
    this.sound = sound;
    return this;
  }
}
