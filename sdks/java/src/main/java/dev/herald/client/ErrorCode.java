package dev.herald.client;

/**
 * Herald's stable error codes (docs/protocol.md section 7) with the HTTP status that carries each.
 * The {@code disconnect}-only codes ({@code slow_consumer}, {@code shutdown}) are not error codes:
 * they arrive as {@link HeraldException#code()} of a disconnect, never as an {@code ErrorCode}.
 */
public enum ErrorCode {
  BAD_REQUEST("bad_request", 400),
  UNKNOWN_COMMAND("unknown_command", 400),
  CHANNEL_INVALID("channel_invalid", 400),
  ALREADY_SUBSCRIBED("already_subscribed", 400),
  NOT_SUBSCRIBED("not_subscribed", 400),
  TOO_MANY_SUBSCRIPTIONS("too_many_subscriptions", 400),
  TAG_INVALID("tag_invalid", 400),
  TAG_EXPRESSION_INVALID("tag_expression_invalid", 400),
  DEVICE_INVALID("device_invalid", 400),
  UNAUTHORIZED("unauthorized", 401),
  TOKEN_EXPIRED("token_expired", 401),
  FORBIDDEN("forbidden", 403),
  NOT_FOUND("not_found", 404),
  CONFLICT("conflict", 409),
  METHOD_NOT_ALLOWED("method_not_allowed", 405),
  TOO_LARGE("too_large", 413),
  REQUEST_TIMEOUT("request_timeout", 408),
  LIMIT_EXCEEDED("limit_exceeded", 429),
  RATE_LIMITED("rate_limited", 429),
  STORE_FAILED("store_failed", 500),
  STORE_UNAVAILABLE("store_unavailable", 503),
  INSUFFICIENT_STORAGE("insufficient_storage", 507),
  STORE_HALTED("store_halted", 503),
  INTERNAL("internal", 500),
  SHUTTING_DOWN("shutting_down", 503);

  private final String wire;
  private final int status;

  ErrorCode(String wire, int status) {
    this.wire = wire;
    this.status = status;
  }

  /** The code as the server writes it, e.g. {@code "token_expired"}. */
  public String wire() {
    return wire;
  }

  /** The HTTP status that carries this code. */
  public int httpStatus() {
    return status;
  }

  /** The code named by {@code wire} (exact, case-sensitive), or {@code null} for anything else. */
  public static ErrorCode fromWire(String wire) {
    if (wire == null) {
      return null;
    }
    for (ErrorCode code : values()) {
      if (code.wire.equals(wire)) {
        return code;
      }
    }
    return null;
  }
}
