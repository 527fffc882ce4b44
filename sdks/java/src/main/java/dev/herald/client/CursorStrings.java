package dev.herald.client;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/**
 * Cursor strings: the SSE {@code id:}/{@code Last-Event-ID} and long-poll {@code since}/{@code cursor}
 * form (one {@code EPOCH:SEQ} position per channel, comma-separated), and a device's inbox cursor
 * ({@code $app} position, then {@code $device}).
 */
public final class CursorStrings {
  private CursorStrings() {}

  /**
   * Reads a cursor string for a request naming {@code channels} channels. Entries are {@code null}
   * for channels the string leaves unset.
   *
   * @throws HeraldException {@code bad_request} for a string the server would refuse
   */
  public static List<Cursor> parse(String wire, int channels) {
    if (channels < 1) {
      throw bad("a cursor needs at least one channel");
    }
    List<Cursor> out = new ArrayList<>(Collections.<Cursor>nCopies(channels, null));
    if (wire.trim().isEmpty()) {
      return out;
    }
    String[] parts = wire.split(",", -1);
    if (parts.length > channels) {
      throw bad("the cursor has " + parts.length + " positions for " + channels + " channels");
    }
    for (int i = 0; i < parts.length; i++) {
      out.set(i, parsePosition(parts[i].trim()));
    }
    return out;
  }

  private static Cursor parsePosition(String position) {
    if (position.isEmpty()) {
      throw bad("empty cursor position");
    }
    int colon = position.indexOf(':');
    String epoch = colon < 0 ? "" : position.substring(0, colon);
    String seq = colon < 0 ? position : position.substring(colon + 1);
    for (int i = 0; i < epoch.length(); i++) {
      char c = epoch.charAt(i);
      boolean alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
      if (!alnum) {
        throw bad("a cursor epoch must be ASCII letters and digits: \"" + epoch + "\"");
      }
    }
    Long value = parseSeq(seq);
    if (value == null) {
      throw bad("a cursor seq must be a number from 0 to 2^64-1: \"" + seq + "\"");
    }
    return new Cursor(epoch, value);
  }

  /** An unsigned decimal seq, or {@code null} when it is not one. */
  static Long parseSeq(String digits) {
    if (digits.isEmpty() || digits.length() > 20) {
      return null;
    }
    for (int i = 0; i < digits.length(); i++) {
      if (digits.charAt(i) < '0' || digits.charAt(i) > '9') {
        return null;
      }
    }
    try {
      return Long.parseUnsignedLong(digits);
    } catch (NumberFormatException overflow) {
      return null;
    }
  }

  /** Writes every position as {@code EPOCH:SEQ}, comma-separated. */
  public static String format(List<Cursor> positions) {
    StringBuilder s = new StringBuilder();
    for (Cursor c : positions) {
      if (c == null) {
        throw new IllegalArgumentException("every position of a cursor string must be set");
      }
      if (s.length() > 0) {
        s.append(',');
      }
      s.append(c.position());
    }
    return s.toString();
  }

  /** A device's inbox cursor: index 0 is {@code $app}, index 1 {@code $device}. Never fails: a missing or unreadable position reads as {@code :0}. */
  public static Cursor[] parseInbox(String wire) {
    String[] parts = wire.split(",", -1);
    Cursor[] out = new Cursor[] {new Cursor("", 0), new Cursor("", 0)};
    for (int i = 0; i < 2 && i < parts.length; i++) {
      String p = parts[i].trim();
      int colon = p.indexOf(':');
      String epoch = colon < 0 ? "" : p.substring(0, colon);
      Long seq = parseSeq(colon < 0 ? p : p.substring(colon + 1));
      out[i] = new Cursor(epoch, seq == null ? 0 : seq);
    }
    return out;
  }

  /** {@code APP_EPOCH:SEQ,DEVICE_EPOCH:SEQ}. */
  public static String formatInbox(Cursor app, Cursor device) {
    return app.position() + "," + device.position();
  }

  private static HeraldException bad(String message) {
    return new HeraldException(ErrorCode.BAD_REQUEST.wire(), message, 400, -1, null);
  }
}
