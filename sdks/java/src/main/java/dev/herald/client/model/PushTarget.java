package dev.herald.client.model;

/** Who a push is for: exactly one of a device, a user, a tag expression, or the whole app. */
public final class PushTarget {
  public String device;
  public String user;
  public String tags;
  public Boolean app;

  public static PushTarget device(String id) {
    PushTarget t = new PushTarget();
    t.device = id;
    return t;
  }

  public static PushTarget user(String user) {
    PushTarget t = new PushTarget();
    t.user = user;
    return t;
  }

  /** A tag expression such as {@code sports AND (uk OR ie) AND NOT muted}. */
  public static PushTarget tags(String expression) {
    PushTarget t = new PushTarget();
    t.tags = expression;
    return t;
  }

  public static PushTarget app() {
    PushTarget t = new PushTarget();
    t.app = Boolean.TRUE;
    return t;
  }
}
