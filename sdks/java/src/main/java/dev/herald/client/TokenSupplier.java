package dev.herald.client;

/**
 * Gives the client a token: called before each connection (the first, and every reconnect,
 * including after {@code token_expired}) and by {@link HeraldClient#refreshToken()}. Return
 * {@code null} for no token (anonymous mode).
 */
@FunctionalInterface
public interface TokenSupplier {
  String token() throws Exception;
}
