package dev.herald.client;

import dev.herald.client.internal.Json;
import dev.herald.client.model.ChannelPresence;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import okhttp3.OkHttpClient;

/**
 * A subscriber of a Herald server over its WebSocket ({@code /v1/ws}), shaped like Deacon's
 * {@code DeaconService}: {@link #joinChannel}/{@link #leaveChannel}, {@link #register}/{@link
 * #unregister} observers, {@link #start}/{@link #stop}.
 *
 * <p>It keeps each joined channel's cursor (epoch and seq of the last message handed to the
 * observers) and resubscribes with {@code since} after every reconnect, so observers see each
 * message once, in order, across disconnects and server restarts. It reconnects with capped
 * exponential backoff and full jitter, asking its {@link TokenSupplier} for a token before every
 * connection. With a device token it receives the device inbox and acknowledges each inbox message
 * after the observers return normally (or, with {@code autoAck(false)}, when {@link #ack} is called).
 *
 * <pre>{@code
 * HeraldClient client = HeraldClient.builder("http://127.0.0.1:7070").token(token).build();
 * client.register(message -> System.out.println(message.channel() + ": " + message.dataJson()));
 * client.joinChannel("news", 0);
 * client.start();
 * }</pre>
 */
public final class HeraldClient {
  /** {@link #joinChannel(String, int)}: replay every retained message on the first subscribe. */
  public static final int CATCH_UP_ALL = Integer.MAX_VALUE;

  final String wsUrl;
  final OkHttpClient http;
  final TokenSupplier tokens;
  final boolean autoAck;
  final Backoff backoff;
  final ScheduledExecutorService timer;
  final List<HeraldObserver> observers = new CopyOnWriteArrayList<>();

  /** Serialises observer calls across connections (an old reader may still be delivering). */
  final Object delivery = new Object();
  /** Guards everything below, and {@link Connection}'s state. */
  final Object lock = new Object();
  /** Joined channels in join order. */
  final Map<String, ChannelState> channels = new LinkedHashMap<>();
  boolean running;
  boolean everConnected;
  Connection current;
  /** A server closed a connection with 1009 after a batch: subscribes go one a message from then on. */
  volatile boolean batchesTooBig;

  private HeraldClient(Builder b) {
    String base = b.baseUrl.endsWith("/") ? b.baseUrl.substring(0, b.baseUrl.length() - 1) : b.baseUrl;
    this.wsUrl = base + "/v1/ws";
    this.http = b.http != null
        ? b.http
        : new OkHttpClient.Builder().pingInterval(b.pingSeconds, TimeUnit.SECONDS).build();
    this.tokens = b.tokens;
    this.autoAck = b.autoAck;
    this.backoff = new Backoff(b.initialBackoffMillis, b.maxBackoffMillis, new Random());
    ScheduledThreadPoolExecutor t = new ScheduledThreadPoolExecutor(1, runnable -> {
      Thread thread = new Thread(runnable, "herald-client-reconnect");
      thread.setDaemon(true);
      return thread;
    });
    t.setRemoveOnCancelPolicy(true);
    this.timer = t;
  }

  /** A builder for a client of the server at {@code baseUrl} ({@code http://host:port} or {@code https://...}). */
  public static Builder builder(String baseUrl) {
    return new Builder(baseUrl);
  }

  /** Options of a {@link HeraldClient}. */
  public static final class Builder {
    private final String baseUrl;
    private TokenSupplier tokens = () -> null;
    private OkHttpClient http;
    private boolean autoAck = true;
    private long initialBackoffMillis = 1000;
    private long maxBackoffMillis = 30_000;
    private long pingSeconds = 20;

    private Builder(String baseUrl) {
      this.baseUrl = baseUrl;
    }

    /** A fixed token (used on every connection). */
    public Builder token(String token) {
      this.tokens = () -> token;
      return this;
    }

    /** A token supplier, called before every connection and on {@link HeraldClient#refreshToken()}. */
    public Builder tokenSupplier(TokenSupplier supplier) {
      this.tokens = supplier;
      return this;
    }

    /** Acknowledge inbox messages automatically after the observers return normally (default true). */
    public Builder autoAck(boolean autoAck) {
      this.autoAck = autoAck;
      return this;
    }

    /** Reconnect delays: full jitter under {@code initial * 2^failures}, capped at {@code max} (default 1 s, 30 s). */
    public Builder backoff(long initialMillis, long maxMillis) {
      this.initialBackoffMillis = initialMillis;
      this.maxBackoffMillis = maxMillis;
      return this;
    }

    /** WebSocket ping interval for noticing a dead connection (default 20 s); ignored with {@link #okHttpClient}. */
    public Builder pingIntervalSeconds(long seconds) {
      this.pingSeconds = seconds;
      return this;
    }

    /** The OkHttp client to use (share one per app; set its {@code pingInterval}). */
    public Builder okHttpClient(OkHttpClient client) {
      this.http = client;
      return this;
    }

    public HeraldClient build() {
      return new HeraldClient(this);
    }
  }

  /** Adds an observer (Deacon's {@code register}). */
  public void register(HeraldObserver observer) {
    observers.add(observer);
  }

  /** Removes an observer. */
  public void unregister(HeraldObserver observer) {
    observers.remove(observer);
  }

  /**
   * Joins a channel. On the first subscribe, {@code catchUp} newest retained messages are replayed
   * first (0: live messages only; {@link #CATCH_UP_ALL}: everything retained); after that the
   * channel resumes from its cursor. Joining a joined channel changes nothing.
   */
  public void joinChannel(String name, int catchUp) {
    join(new ChannelState(name, Math.max(0, catchUp), null));
  }

  /** Joins a channel resuming after {@code since} (a cursor saved from an earlier run). */
  public void joinChannel(String name, Cursor since) {
    join(new ChannelState(name, 0, since));
  }

  /**
   * Joins a presence channel and asks for its presence: the observers' {@link
   * HeraldObserver#onPresence} gets its members after every (re)subscribe, then each join and leave,
   * and {@link #members} keeps the list. Live messages only (see {@link #joinPresenceChannel(String,
   * int, Map)}).
   */
  public void joinPresenceChannel(String name) {
    joinPresenceChannel(name, 0, null);
  }

  /**
   * Joins a presence channel as {@link #joinChannel(String, int)} does, asking for its presence;
   * {@code member} (or null) is this client's member data, used only when its token has no {@code
   * user_info} claim (supplied by the client, so nobody verifies it).
   */
  public void joinPresenceChannel(String name, int catchUp, Map<String, ?> member) {
    String memberJson = member == null ? null : Json.GSON.toJson(member);
    join(new ChannelState(name, Math.max(0, catchUp), null, true, memberJson));
  }

  /**
   * The members of a channel joined with {@link #joinPresenceChannel}, in the order they joined, as
   * its presence frames left them (the previous connection's until a resubscribe lists them again);
   * null before the server first listed them, for a channel without presence, or one not joined.
   */
  public List<ChannelPresence.Member> members(String channel) {
    synchronized (lock) {
      ChannelState state = channels.get(channel);
      return state == null || !state.presence ? null : state.memberList();
    }
  }

  private void join(ChannelState state) {
    synchronized (lock) {
      if (channels.containsKey(state.name)) {
        return;
      }
      channels.put(state.name, state);
      if (current != null && current.ready) {
        current.subscribe(state);
      }
    }
  }

  /** Leaves a channel: no message of it reaches the observers afterwards. */
  public void leaveChannel(String name) {
    synchronized (lock) {
      ChannelState state = channels.remove(name);
      if (state != null && current != null && current.ready && state.subscribedOn == current) {
        current.send(ClientCommand.unsubscribe(current.nextId(), name));
      }
    }
  }

  /** Whether the channel is joined (Deacon's {@code checkChannel}). */
  public boolean checkChannel(String name) {
    synchronized (lock) {
      return channels.containsKey(name);
    }
  }

  /** The joined channels, in join order. */
  public List<String> channels() {
    synchronized (lock) {
      return new ArrayList<>(channels.keySet());
    }
  }

  /** The cursor of a joined channel (persist it to resume after a restart), or {@code null}. */
  public Cursor cursor(String channel) {
    synchronized (lock) {
      ChannelState state = channels.get(channel);
      return state == null ? null : state.cursor;
    }
  }

  /** Connects, and keeps reconnecting until {@link #stop()}. */
  public void start() {
    synchronized (lock) {
      if (running) {
        return;
      }
      running = true;
    }
    timer.execute(this::connect);
  }

  /** Closes the connection and stops reconnecting. Joined channels and their cursors are kept. */
  public void stop() {
    Connection closing;
    synchronized (lock) {
      running = false;
      closing = current;
      current = null;
    }
    if (closing != null) {
      closing.ws.close(1000, null);
    }
  }

  /** Whether the client was started and not stopped. */
  public boolean isRunning() {
    synchronized (lock) {
      return running;
    }
  }

  /** Whether a connection is open and authenticated now. */
  public boolean isConnected() {
    synchronized (lock) {
      return current != null && current.ready;
    }
  }

  /**
   * Acknowledges an inbox message (and everything before it in its log). Completes when the server
   * stored the ack; fails with the server's error (also reported to the observers).
   */
  public CompletableFuture<Void> ack(Message message) {
    if (!message.isInbox()) {
      throw new IllegalArgumentException("only inbox messages ($app, $device) are acknowledged");
    }
    CompletableFuture<Void> done = new CompletableFuture<>();
    synchronized (lock) {
      if (current == null || !current.ready) {
        done.completeExceptionally(new HeraldException("not connected", null));
        return done;
      }
      current.ack(message, done);
    }
    return done;
  }

  /**
   * Asks the token supplier for a new token and sends it on the open connection ({@code connect}
   * with the same {@code sub}), before the old one expires. Channels the new token no longer allows
   * are left and reported as {@code forbidden} errors.
   */
  public CompletableFuture<Void> refreshToken() {
    CompletableFuture<Void> done = new CompletableFuture<>();
    String token;
    try {
      token = tokens.token();
    } catch (Exception e) {
      done.completeExceptionally(new HeraldException("the token supplier failed", e));
      return done;
    }
    synchronized (lock) {
      if (current == null || !current.ready) {
        done.completeExceptionally(new HeraldException("not connected", null));
        return done;
      }
      current.refresh(token, done);
    }
    return done;
  }

  /** Opens one connection (on the timer thread). */
  void connect() {
    synchronized (lock) {
      if (!running || current != null) {
        return;
      }
    }
    String token;
    try {
      token = tokens.token();
    } catch (Exception e) {
      notifyError(new HeraldException("the token supplier failed", e));
      scheduleReconnect();
      return;
    }
    synchronized (lock) {
      if (!running || current != null) {
        return;
      }
      current = new Connection(this, token);
    }
  }

  void scheduleReconnect() {
    synchronized (lock) {
      if (!running) {
        return;
      }
    }
    timer.schedule(this::connect, backoff.nextDelayMillis(), TimeUnit.MILLISECONDS);
  }

  void notifyError(HeraldException error) {
    for (HeraldObserver o : observers) {
      try {
        o.onError(error);
      } catch (RuntimeException ignored) {
        // An observer's failure in onError has nowhere else to go.
      }
    }
  }

  @Override
  public String toString() {
    return "HeraldClient @ " + wsUrl;
  }
}
