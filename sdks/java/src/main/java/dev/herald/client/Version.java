package dev.herald.client;

import java.io.IOException;
import java.io.InputStream;
import java.util.Properties;

/** The SDK's version, which is the Herald server version it was released with. */
public final class Version {
  private Version() {}

  /** This SDK's version (equal to the server's workspace version). */
  public static final String SDK = load();

  private static String load() {
    Properties p = new Properties();
    try (InputStream in = Version.class.getResourceAsStream("version.properties")) {
      if (in != null) {
        p.load(in);
      }
    } catch (IOException e) {
      return "unknown";
    }
    return p.getProperty("version", "unknown");
  }
}
