package dev.herald.client;

import java.util.Random;

/**
 * Reconnect delays: capped exponential backoff with full jitter. The n-th consecutive failure
 * waits a uniformly random time in {@code [0, min(max, initial * 2^n)]} milliseconds, so that many
 * clients do not come back at the same instant after a restart.
 */
public final class Backoff {
  private final long initialMillis;
  private final long maxMillis;
  private final Random random;
  private int failures;

  public Backoff(long initialMillis, long maxMillis, Random random) {
    if (initialMillis <= 0 || maxMillis < initialMillis) {
      throw new IllegalArgumentException("need 0 < initial <= max");
    }
    this.initialMillis = initialMillis;
    this.maxMillis = maxMillis;
    this.random = random;
  }

  /** The upper bound of the next delay. */
  public synchronized long ceilingMillis() {
    long ceiling = initialMillis;
    for (int i = 0; i < failures && ceiling < maxMillis; i++) {
      ceiling *= 2;
    }
    return Math.min(ceiling, maxMillis);
  }

  /** The delay before the next attempt; counts one more failure. */
  public synchronized long nextDelayMillis() {
    long ceiling = ceilingMillis();
    failures++;
    return (long) (random.nextDouble() * (ceiling + 1));
  }

  /** A connection succeeded: the next failure starts from {@code initial} again. */
  public synchronized void reset() {
    failures = 0;
  }
}
