package dev.herald.client;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/** The SDK is versioned with the server: its version is the workspace version of /Cargo.toml. */
class VersionTest {
  @Test
  void sdkVersionIsTheWorkspaceVersion() throws Exception {
    String cargo = new String(Files.readAllBytes(Paths.get("../../Cargo.toml")), StandardCharsets.UTF_8);
    Matcher section = Pattern.compile("(?ms)^\\[workspace\\.package\\](.*?)(^\\[|\\z)").matcher(cargo);
    if (!section.find()) {
      throw new AssertionError("no [workspace.package] in Cargo.toml");
    }
    Matcher version = Pattern.compile("(?m)^version\\s*=\\s*\"([^\"]+)\"").matcher(section.group(1));
    if (!version.find()) {
      throw new AssertionError("no version in [workspace.package]");
    }
    assertEquals(version.group(1), Version.SDK, "sdks/java/pom.xml <version> must equal the workspace version");
  }
}
