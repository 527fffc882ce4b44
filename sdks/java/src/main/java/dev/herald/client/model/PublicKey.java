package dev.herald.client.model;

/**
 * A public key that verifies an app's client tokens: PEM, RSA for {@code RS256} or P-256 for
 * {@code ES256}, named by {@code kid} in a token's header (optional).
 */
public final class PublicKey {
  public String kid;
  public String alg;
  public String pem;

  public PublicKey() {}

  public PublicKey(String kid, String alg, String pem) {
    this.kid = kid;
    this.alg = alg;
    this.pem = pem;
  }
}
