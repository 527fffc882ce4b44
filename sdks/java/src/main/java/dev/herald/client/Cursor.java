package dev.herald.client;

/**
 * A position in a channel (or inbox log): its {@link #epoch()} and {@link #seq()}, meaning "every
 * message up to and including {@code seq} of {@code epoch} was processed". {@code seq} is an
 * unsigned 64-bit number held in a {@code long} (compare with {@link Long#compareUnsigned}); an
 * empty epoch means "the channel's current epoch", seq 0 "before the first message".
 */
public final class Cursor {
  private final String epoch;
  private final long seq;

  public Cursor(String epoch, long seq) {
    this.epoch = epoch == null ? "" : epoch;
    this.seq = seq;
  }

  public String epoch() {
    return epoch;
  }

  /** The seq, unsigned. */
  public long seq() {
    return seq;
  }

  /** {@code EPOCH:SEQ}, the form of one position of a cursor string. */
  public String position() {
    return epoch + ":" + Long.toUnsignedString(seq);
  }

  @Override
  public boolean equals(Object o) {
    if (!(o instanceof Cursor)) {
      return false;
    }
    Cursor other = (Cursor) o;
    return seq == other.seq && epoch.equals(other.epoch);
  }

  @Override
  public int hashCode() {
    return epoch.hashCode() * 31 + Long.hashCode(seq);
  }

  @Override
  public String toString() {
    return position();
  }
}
