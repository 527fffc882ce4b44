/**
 * Reconnect delays: capped exponential backoff with full jitter (a uniformly random delay between
 * 0 and min(max, initial * 2^attempt)), so clients returning after an outage spread out.
 */

export interface BackoffOptions {
  /** The cap of the first delay, in ms (default 500). */
  initialMs?: number;
  /** The largest delay, in ms (default 30000). */
  maxMs?: number;
}

export class Backoff {
  private attempt = 0;
  private readonly initialMs: number;
  private readonly maxMs: number;

  constructor(options: BackoffOptions = {}, private readonly random: () => number = Math.random) {
    this.initialMs = Math.max(1, options.initialMs ?? 500);
    this.maxMs = Math.max(this.initialMs, options.maxMs ?? 30_000);
  }

  /** The delay before the next attempt; each call doubles the cap until `maxMs`. */
  next(): number {
    const cap = Math.min(this.maxMs, this.initialMs * 2 ** Math.min(this.attempt, 30));
    this.attempt += 1;
    return Math.floor(this.random() * cap);
  }

  /** After a connection that worked: start again from the first delay. */
  reset(): void {
    this.attempt = 0;
  }
}
