package dev.herald.client.model;

import java.util.List;

/** A page of dead letters; {@code next} is the id to pass as {@code after}, or null. Field names are the JSON fields in camelCase. */
public final class DeadLetterList {
  public List<DeadLetter> jobs;
  public Long next;
}
