package dev.herald.client.model;

import java.util.List;

/** A device registration ({@code POST /v1/devices}). Field names are the JSON fields in camelCase. */
public final class Registration {
  public String id;
  public String platform;
  public String token;
  public WebPushKeys keys;
  public String user;
  public List<String> tags;
  public String locale;
  public Boolean active;

  public Registration id(String id) {
    this.id = id;
    return this;
  }

  public Registration platform(String platform) {
    this.platform = platform;
    return this;
  }

  public Registration token(String token) {
    this.token = token;
    return this;
  }

  public Registration keys(WebPushKeys keys) {
    this.keys = keys;
    return this;
  }

  public Registration user(String user) {
    this.user = user;
    return this;
  }

  public Registration tags(List<String> tags) {
    this.tags = tags;
    return this;
  }

  public Registration locale(String locale) {
    this.locale = locale;
    return this;
  }

  public Registration active(Boolean active) {
    this.active = active;
    return this;
  }
}
