package dev.herald.client.model;

/** The part of an app's provider credentials that may be shown (never a private key). Field names are the JSON fields in camelCase. */
public final class ProviderPublic {
  public String provider;
  public long updated;
  public String auth;
  public String topic;
  public String environment;
  public String keyId;
  public String teamId;
  public String projectId;
  public String clientEmail;
  public String subject;
  public String publicKey;
}
