package dev.herald.client;

/**
 * The one error type of this SDK. A server error carries the server's {@link #code()} (for example
 * {@code forbidden}, {@code token_expired}, or a disconnect's {@code slow_consumer}) and its
 * {@link #getMessage() message}; an HTTP error also its {@link #httpStatus()} and
 * {@link #retryAfterSeconds()}. An error of this side (connection refused, a dropped connection,
 * an observer that threw) has {@link #code()} {@code null} and the underlying exception as its
 * cause; so has an HTTP answer that is not Herald's JSON error (a proxy's page), which keeps its
 * {@link #httpStatus()}. A frame or body that breaks the protocol is {@code bad_request}.
 */
public class HeraldException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final String code;
  private final int httpStatus;
  private final long retryAfterSeconds;
  private final String channel;

  /** A server error: its code and message, the HTTP status (0 over WebSocket), Retry-After (-1 if none). */
  public HeraldException(String code, String message, int httpStatus, long retryAfterSeconds, String channel) {
    super(message);
    this.code = code;
    this.httpStatus = httpStatus;
    this.retryAfterSeconds = retryAfterSeconds;
    this.channel = channel;
  }

  /** An error of this side: no server code. */
  public HeraldException(String message, Throwable cause) {
    super(message, cause);
    this.code = null;
    this.httpStatus = 0;
    this.retryAfterSeconds = -1;
    this.channel = null;
  }

  /** A WebSocket error frame or disconnect: code and message, no HTTP status. */
  static HeraldException fromServer(String code, String message, String channel) {
    return new HeraldException(code, message, 0, -1, channel);
  }

  /** The server's code as it sent it, or {@code null} when the error did not come from the server. */
  public String code() {
    return code;
  }

  /** {@link #code()} as an {@link ErrorCode}, or {@code null} (no code, or a disconnect-only code). */
  public ErrorCode errorCode() {
    return ErrorCode.fromWire(code);
  }

  /** The HTTP status of the answer, or 0 when the error did not come over HTTP. */
  public int httpStatus() {
    return httpStatus;
  }

  /** The answer's {@code Retry-After} in seconds, or -1 when it had none. */
  public long retryAfterSeconds() {
    return retryAfterSeconds;
  }

  /** The channel the error is about (a refused subscribe), or {@code null}. */
  public String channel() {
    return channel;
  }

  /** Whether the error carries a server {@link #code()}. */
  public boolean isFromServer() {
    return code != null;
  }

  @Override
  public String toString() {
    StringBuilder s = new StringBuilder("HeraldException[");
    if (code != null) {
      s.append(code);
    } else {
      s.append("client");
    }
    if (httpStatus != 0) {
      s.append(", HTTP ").append(httpStatus);
    }
    if (channel != null) {
      s.append(", channel ").append(channel);
    }
    return s.append("]: ").append(getMessage()).toString();
  }
}
