package dev.herald.client.model;

import com.google.gson.JsonObject;

/**
 * One admin action of the audit log: who acted ({@code actor}), from where ({@code source}, the TCP
 * peer), what ({@code action}, {@code app}, {@code target}, non-secret {@code details}), when
 * ({@code time}, server time in ms) and how it ended ({@code result}: {@code ok} or the error code).
 * Field names are the JSON fields in camelCase.
 */
public final class AuditEntry {
  public long id;
  public long time;
  public Actor actor;
  public String source;
  public String userAgent;
  public String action;
  public String app;
  public String target;
  public JsonObject details;
  public String result;

  /** Who acted: the credential's role, a publisher key's id (never the key), and how it came. */
  public static final class Actor {
    /** {@code admin}, {@code publisher}, or {@code anonymous} (a failed dashboard log-in). */
    public String role;
    public String keyId;
    /** {@code bearer}, {@code session} or {@code login}. */
    public String via;
  }
}
