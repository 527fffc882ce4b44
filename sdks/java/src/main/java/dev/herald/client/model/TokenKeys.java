package dev.herald.client.model;

import java.util.List;

/**
 * What verifies an app's client tokens (never a secret): whether it has an HS256 secret, until
 * when the previous secret of a rotation verifies (seconds since the Unix epoch, or null), its
 * public keys and its JWKS URL.
 */
public final class TokenKeys {
  public String app;
  public boolean hs256;
  public Long previousValidUntil;
  public List<PublicKey> keys;
  public String jwksUrl;
}
