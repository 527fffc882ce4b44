package dev.herald.client.model;

/**
 * A cumulative histogram of the overview: {@code buckets} are {@code [upper bound in seconds,
 * observations at or below it]}, ascending. Field names are the JSON fields in camelCase.
 */
public final class Histogram {
  public double[][] buckets;
  public double sumSeconds;
  public long count;
}
