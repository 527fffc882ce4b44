package dev.herald.client.model;

/**
 * {@code GET /readyz}, readiness: {@code status} {@code ready} or {@code not_ready}, and what each
 * check found. {@link dev.herald.client.PublisherClient#ready()} answers it when the node is
 * ready; a {@code 503} throws {@link dev.herald.client.NotReadyException}, which carries it.
 */
public final class Readiness {
  /** {@code ready} or {@code not_ready}. */
  public String status;
  public Checks checks;

  /** Whether every check passes. */
  public boolean isReady() {
    return "ready".equals(status);
  }

  /** Every check {@code /readyz} makes. */
  public static final class Checks {
    /** Whether the store takes writes. */
    public Check store;
    /** The bus to the other nodes; {@link Check#link} says which. */
    public Check bus;
    /** True once the server began shutting down. */
    public boolean draining;
  }

  /** One check: {@code status} {@code ok} or {@code failing} (then with {@code error}). */
  public static final class Check {
    public String status;
    /** The bus only: {@code local} (one node), {@code connected} or {@code disconnected}. */
    public String link;
    /** A failing check's error, or null. */
    public CheckError error;

    /** Whether this check passes. */
    public boolean isOk() {
      return "ok".equals(status);
    }
  }

  /** A failing check's error, in the {@code {"code","message"}} form of every API error. */
  public static final class CheckError {
    public String code;
    public String message;
  }
}
