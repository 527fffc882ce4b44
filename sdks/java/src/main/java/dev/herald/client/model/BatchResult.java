package dev.herald.client.model;

import dev.herald.client.HeraldException;

/** The answer for one item of a batch: the stored message, or the error of its channel. */
public final class BatchResult {
  /** The stored message, or null when {@link #error} is set. */
  public final Published published;
  /** The error storing this item's channel failed with, or null. */
  public final HeraldException error;

  public BatchResult(Published published, HeraldException error) {
    this.published = published;
    this.error = error;
  }
}
