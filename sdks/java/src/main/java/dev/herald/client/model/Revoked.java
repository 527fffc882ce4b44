package dev.herald.client.model;

/** The answer of a revocation: how many connections the answering node closed. */
public final class Revoked {
  public long closed;
}
