package dev.herald.client;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * A real {@code herald serve} for the tests: the binary named by {@code -Dherald.bin} or
 * {@code $HERALD_BIN}, on 127.0.0.1 port 0 with a fresh data directory, none of the caller's
 * {@code HERALD_*} variables, and known keys. {@link #kill()} and {@link #restart()} keep the port
 * and the data directory, as a crashed and restarted deployment would. Every wait is bounded.
 */
final class HeraldServer implements AutoCloseable {
  static final String API_KEY = "hk_java_sdk_test_publisher_key";
  static final String ADMIN_KEY = "java-sdk-test-admin-key-0123456789";
  static final String TOKEN_SECRET = "java-sdk-test-token-secret-0123456789";
  static final long WAIT_SECONDS = 20;

  private final Path dir;
  private final Map<String, String> env;
  private final List<String> extraArgs;
  private final String tokenSecret;
  private final List<String> through;
  private Process process;
  private String address;
  private final StringBuffer log = new StringBuffer();

  private HeraldServer(Map<String, String> env, List<String> extraArgs, String tokenSecret, List<String> through)
      throws IOException {
    this.dir = Files.createTempDirectory("herald-java-sdk-");
    this.env = env;
    this.extraArgs = extraArgs;
    this.tokenSecret = tokenSecret;
    this.through = through;
  }

  /** Starts a server with extra environment variables for it (e.g. HERALD_OUTBOX_BYTES) and extra flags. */
  static HeraldServer start(Map<String, String> env, List<String> extraArgs) throws Exception {
    return start(env, extraArgs, TOKEN_SECRET);
  }

  /** Starts a server whose default app signs tokens with {@code tokenSecret}. */
  static HeraldServer start(Map<String, String> env, List<String> extraArgs, String tokenSecret) throws Exception {
    return start(env, extraArgs, tokenSecret, java.util.Collections.<String>emptyList());
  }

  /** Starts a server run by the command {@code through} (e.g. {@code prlimit --fsize=N:}). */
  static HeraldServer startThrough(List<String> through, Map<String, String> env) throws Exception {
    return start(env, java.util.Collections.<String>emptyList(), TOKEN_SECRET, through);
  }

  private static HeraldServer start(Map<String, String> env, List<String> extraArgs, String tokenSecret,
      List<String> through) throws Exception {
    HeraldServer server = new HeraldServer(env, extraArgs, tokenSecret, through);
    try {
      server.spawn("127.0.0.1:0");
    } catch (Exception e) {
      server.close();
      throw e;
    }
    return server;
  }

  static HeraldServer start() throws Exception {
    return start(java.util.Collections.<String, String>emptyMap(), java.util.Collections.<String>emptyList());
  }

  static String binary() {
    String bin = System.getProperty("herald.bin");
    if (bin == null || bin.isEmpty()) {
      bin = System.getenv("HERALD_BIN");
    }
    if (bin == null || bin.isEmpty()) {
      bin = "../../target/debug/herald";
    }
    Path path = Paths.get(bin).toAbsolutePath();
    if (!Files.isExecutable(path)) {
      throw new IllegalStateException("herald binary not found at " + path + ": set HERALD_BIN");
    }
    return path.toString();
  }

  private void spawn(String listen) throws Exception {
    List<String> command = new ArrayList<>(through);
    command.add(binary());
    String[] base = {"serve", "--listen", listen, "--data", dir.resolve("data").toString(), "--api-key", API_KEY,
        "--admin-key", ADMIN_KEY, "--token-secret", tokenSecret};
    for (String arg : base) {
      command.add(arg);
    }
    command.addAll(extraArgs);
    ProcessBuilder builder = new ProcessBuilder(command);
    builder.environment().keySet().removeIf(k -> k.startsWith("HERALD_"));
    builder.environment().put("HERALD_LOG", System.getenv().getOrDefault("HERALD_TEST_LOG", "warn"));
    builder.environment().putAll(env);
    builder.redirectErrorStream(true);
    Process p = builder.start();
    BlockingQueue<String> ready = new LinkedBlockingQueue<>();
    Thread reader = new Thread(() -> {
      try (BufferedReader lines = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
        String line;
        while ((line = lines.readLine()) != null) {
          log.append(line).append('\n');
          if (log.length() > 16384) {
            log.delete(0, log.length() - 8192);
          }
          if (line.startsWith("herald listening on http://")) {
            ready.add(line.substring("herald listening on http://".length()).trim());
          }
        }
      } catch (IOException ignored) {
        // The process ended.
      }
      ready.add("");
    }, "herald-server-output");
    reader.setDaemon(true);
    reader.start();
    String addr = ready.poll(WAIT_SECONDS, TimeUnit.SECONDS);
    if (addr == null || addr.isEmpty()) {
      p.destroyForcibly().waitFor(WAIT_SECONDS, TimeUnit.SECONDS);
      throw new IllegalStateException("herald did not start (" + listen + "):\n" + log);
    }
    process = p;
    address = addr;
  }

  /** {@code http://127.0.0.1:PORT}. */
  String url() {
    return "http://" + address;
  }

  /** SIGKILL: no shutdown, no disconnect frames. */
  void kill() throws InterruptedException {
    process.destroyForcibly().waitFor(WAIT_SECONDS, TimeUnit.SECONDS);
  }

  /** Starts again on the same port and data directory (retrying the bind for a few seconds). */
  void restart() throws Exception {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_SECONDS);
    while (true) {
      try {
        spawn(address);
        return;
      } catch (IllegalStateException e) {
        if (System.nanoTime() > deadline) {
          throw e;
        }
        Thread.sleep(200); // the port may still be held by the killed process's sockets
      }
    }
  }

  String log() {
    return log.toString();
  }

  /** SIGTERM (SIGKILL after 10 s), then removes the data directory. */
  @Override
  public void close() throws IOException {
    if (process != null && process.isAlive()) {
      process.destroy();
      try {
        if (!process.waitFor(10, TimeUnit.SECONDS)) {
          process.destroyForcibly().waitFor(WAIT_SECONDS, TimeUnit.SECONDS);
        }
      } catch (InterruptedException e) {
        process.destroyForcibly();
        Thread.currentThread().interrupt();
      }
    }
    try (Stream<Path> paths = Files.walk(dir)) {
      paths.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    }
  }
}
