package dev.herald.client.model;

import java.util.List;

/** A page of the audit log, newest first; {@code nextCursor} continues with older entries, or null. */
public final class AuditPage {
  public List<AuditEntry> entries;
  public String nextCursor;
}
