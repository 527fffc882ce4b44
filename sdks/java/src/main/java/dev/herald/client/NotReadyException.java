package dev.herald.client;

import dev.herald.client.model.Readiness;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * {@code GET /readyz} answered {@code 503}: the node is not ready. {@link #code()} is
 * {@code not_ready} (the status word of the answer), {@link #httpStatus()} 503, and the message
 * names each failing check with its error code and message ({@code store: insufficient_storage:
 * ...}); {@link #readiness()} is the whole answer and {@link #failing()} each failing check's error.
 */
public final class NotReadyException extends HeraldException {
  private static final long serialVersionUID = 1L;

  /** The code of this exception: the status word of a {@code 503} readiness answer. */
  public static final String NOT_READY = "not_ready";

  private final transient Readiness readiness;

  NotReadyException(Readiness readiness) {
    super(NOT_READY, describe(failing(readiness)), 503, -1, null);
    this.readiness = readiness;
  }

  /** What {@code /readyz} answered. */
  public Readiness readiness() {
    return readiness;
  }

  /**
   * Each failing check by name ({@code store}, {@code bus}, {@code draining}), in that order, with
   * its error as the server gave it; {@code draining}, which carries none, as {@code shutting_down}.
   */
  public Map<String, HeraldException> failing() {
    return failing(readiness);
  }

  private static Map<String, HeraldException> failing(Readiness readiness) {
    Map<String, HeraldException> found = new LinkedHashMap<>();
    Readiness.Checks checks = readiness.checks;
    if (checks == null) {
      return found;
    }
    addIfFailing(found, "store", checks.store);
    addIfFailing(found, "bus", checks.bus);
    if (checks.draining) {
      found.put("draining", new HeraldException(
          ErrorCode.SHUTTING_DOWN.wire(), "the server is shutting down", 0, -1, null));
    }
    return found;
  }

  private static void addIfFailing(Map<String, HeraldException> found, String name, Readiness.Check check) {
    if (check == null || check.isOk()) {
      return;
    }
    String code = check.error == null ? null : check.error.code;
    String message = check.error == null ? "status " + check.status : check.error.message;
    found.put(name, new HeraldException(code, message, 0, -1, null));
  }

  private static String describe(Map<String, HeraldException> failing) {
    StringBuilder s = new StringBuilder();
    for (Map.Entry<String, HeraldException> check : failing.entrySet()) {
      if (s.length() > 0) {
        s.append("; ");
      }
      s.append(check.getKey()).append(": ").append(check.getValue().code()).append(": ")
          .append(check.getValue().getMessage());
    }
    return s.length() == 0 ? "not ready" : s.toString();
  }
}
