package dev.herald.client;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import okhttp3.Request;
import okhttp3.Response;
import okhttp3.WebSocket;
import okhttp3.WebSocketListener;

/**
 * One WebSocket connection of a {@link HeraldClient}: sends {@code connect} and the subscribes,
 * routes replies to what asked for them, hands messages to the observers and moves the cursors.
 * Frames are processed one at a time under the client's delivery lock, so observers are called
 * one at a time and in order even while an old connection's reader is still finishing.
 *
 * <p>The subscribes sent once {@code connect} is answered (every joined channel, a reconnect's
 * resubscribes) go in batches: JSON arrays of at most {@value #MAX_BATCH_COMMANDS} commands and
 * 16 KiB in one WebSocket message, each command still answered on its own (docs/protocol.md,
 * "Batches"). A server that predates batches answers one with a {@code bad_request} error without
 * an id ({@code frame is not a JSON object}) and runs nothing of it: its commands are sent again
 * one a message, as is everything after it on this connection. Until the server has answered a
 * command of a batch every command goes in an array, so one sent again keeps its place in the
 * order. A close with 1009 (message too big) after a batch turns batches off for the client.
 */
final class Connection extends WebSocketListener {
  private enum Kind { CONNECT, SUBSCRIBE, PROBE, UNSUBSCRIBE, ACK, REFRESH }

  /** The disconnect code of a connection whose access was revoked (docs/protocol.md, "Revocation"). */
  static final String REVOKED = "revoked";
  /** Its WebSocket close code. */
  private static final int REVOKED_CLOSE_CODE = 4003;
  /** At most this many commands in one batch. */
  static final int MAX_BATCH_COMMANDS = 100;
  /** At most this many characters in one batch: a quarter of the server's default {@code max_frame_bytes}. */
  static final int MAX_BATCH_CHARS = 16 * 1024;
  /** The WebSocket close code for a message over the server's size limit. */
  private static final int MESSAGE_TOO_BIG = 1009;
  /** How a server that predates batches answers one. */
  private static final String BATCH_REFUSED = "frame is not a JSON object";

  private static final class Pending {
    final Kind kind;
    final ChannelState channel;
    final Cursor since;
    final boolean resuming;
    final CompletableFuture<Void> done;

    Pending(Kind kind, ChannelState channel, Cursor since, boolean resuming, CompletableFuture<Void> done) {
      this.kind = kind;
      this.channel = channel;
      this.since = since;
      this.resuming = resuming;
      this.done = done;
    }
  }

  private final HeraldClient client;
  final WebSocket ws;
  private final String token;
  private final Map<Long, Pending> pending = new HashMap<>();
  private long lastId;
  private long connectId;
  /** {@code connect} answered: subscribes may be sent. */
  boolean ready;
  private boolean closed;
  private HeraldException disconnect;
  /** Whether commands may go in batches on this connection (off once the server refused one). */
  private boolean batches;
  /** While not null, commands are collected here to be sent together ({@link #sendCollected}). */
  private List<String> collecting;
  /** Batches sent before the server answered any of their commands, oldest first: their ids and texts. */
  private final ArrayDeque<List<String>> unconfirmed = new ArrayDeque<>();
  private final ArrayDeque<List<Long>> unconfirmedIdLists = new ArrayDeque<>();
  private final Set<Long> unconfirmedIds = new HashSet<>();
  /** Whether a batch was sent on this connection. */
  private boolean sentBatch;

  Connection(HeraldClient client, String token) {
    this.client = client;
    this.token = token;
    this.batches = !client.batchesTooBig;
    this.ws = client.http.newWebSocket(new Request.Builder().url(client.wsUrl).build(), this);
  }

  long nextId() {
    return ++lastId;
  }

  /** Sends one command (collected while {@link #collecting}); call with the client's lock held. */
  void send(String frame) {
    if (collecting != null) {
      collecting.add(frame);
    } else if (batches && !unconfirmed.isEmpty()) {
      sendBatch(Collections.singletonList(frame));
    } else {
      ws.send(frame);
    }
  }

  /** Sends the commands collected since {@code collecting} was set, in batches. Lock held. */
  private void sendCollected() {
    List<String> frames = collecting;
    collecting = null;
    if (!batches) {
      frames.forEach(ws::send);
      return;
    }
    List<String> batch = new ArrayList<>();
    int chars = 2;
    for (String frame : frames) {
      if (!batch.isEmpty() && (batch.size() == MAX_BATCH_COMMANDS || chars + frame.length() + 1 > MAX_BATCH_CHARS)) {
        sendBatch(batch);
        batch = new ArrayList<>();
        chars = 2;
      }
      batch.add(frame);
      chars += frame.length() + 1;
    }
    if (batch.size() == 1 && unconfirmed.isEmpty()) {
      ws.send(batch.get(0));
    } else if (!batch.isEmpty()) {
      sendBatch(batch);
    }
  }

  /** Sends {@code frames} as one batch, remembered until the server answers one of them. Lock held. */
  private void sendBatch(List<String> frames) {
    List<Long> ids = new ArrayList<>();
    for (String frame : frames) {
      Long id = idOf(frame);
      if (id != null) {
        ids.add(id);
        unconfirmedIds.add(id);
      }
    }
    unconfirmed.add(frames);
    unconfirmedIdLists.add(ids);
    sentBatch = true;
    ws.send("[" + String.join(",", frames) + "]");
  }

  /** The id of a command this SDK wrote ({@code {"id":N,...}}), or null without one. */
  static Long idOf(String frame) {
    if (!frame.startsWith("{\"id\":")) {
      return null;
    }
    int end = frame.indexOf(',', 6);
    return end < 0 ? null : Long.parseUnsignedLong(frame.substring(6, end));
  }

  /**
   * An {@code error} without an id: when it is a server's refusal of the oldest unanswered batch,
   * sends its commands again one a message and answers true. Lock held.
   */
  private boolean batchRefused(ServerFrame frame) {
    String message = frame.string("message");
    if (unconfirmed.isEmpty() || !"bad_request".equals(frame.string("code"))
        || message == null || !message.startsWith(BATCH_REFUSED)) {
      return false;
    }
    batches = false;
    unconfirmedIds.removeAll(unconfirmedIdLists.poll());
    unconfirmed.poll().forEach(ws::send);
    return true;
  }

  @Override
  public void onOpen(WebSocket webSocket, Response response) {
    synchronized (client.lock) {
      connectId = nextId();
      pending.put(connectId, new Pending(Kind.CONNECT, null, null, false, null));
      send(ClientCommand.connect(connectId, token));
    }
  }

  /** Sends the subscribe (or the catch-up probe) of {@code state}. Call with the client's lock held. */
  void subscribe(ChannelState state) {
    state.subscribedOn = this;
    long id = nextId();
    if (state.cursor == null && state.catchUp > 0) {
      pending.put(id, new Pending(Kind.PROBE, state, null, false, null));
      send(ClientCommand.history(id, state.name, 0L, 1));
      return;
    }
    subscribeFrom(id, state, state.cursor, state.resumable);
  }

  private void subscribeFrom(long id, ChannelState state, Cursor since, boolean resuming) {
    pending.put(id, new Pending(Kind.SUBSCRIBE, state, since, resuming, null));
    boolean withEpoch = since != null && !since.epoch().isEmpty();
    send(ClientCommand.subscribe(id, state.name, since, withEpoch, null, state.presence, state.memberJson));
  }

  /** Call with the client's lock held. */
  void ack(Message message, CompletableFuture<Void> done) {
    long id = nextId();
    pending.put(id, new Pending(Kind.ACK, null, null, false, done));
    send(ClientCommand.ack(id, message.channel(), message.seq(), message.epoch()));
  }

  /** Call with the client's lock held. */
  void refresh(String newToken, CompletableFuture<Void> done) {
    long id = nextId();
    pending.put(id, new Pending(Kind.REFRESH, null, null, false, done));
    send(ClientCommand.connect(id, newToken));
  }

  @Override
  public void onMessage(WebSocket webSocket, String text) {
    synchronized (client.delivery) {
      List<Runnable> events = new ArrayList<>();
      Message deliver = null;
      synchronized (client.lock) {
        if (closed) {
          return;
        }
        ServerFrame frame;
        try {
          frame = ServerFrame.decode(text);
        } catch (HeraldException e) {
          events.add(() -> client.notifyError(new HeraldException("unreadable server frame: " + e.getMessage(), e)));
          frame = null;
        }
        if (frame != null) {
          deliver = handle(frame, events);
        }
      }
      for (Runnable event : events) {
        try {
          event.run();
        } catch (RuntimeException e) {
          client.notifyError(new HeraldException("an observer failed", e));
        }
      }
      if (deliver != null) {
        deliver(deliver);
      }
    }
  }

  /** Applies one frame; answers a message to hand to the observers, if any. Lock held. */
  private Message handle(ServerFrame frame, List<Runnable> events) {
    Long id = frame.id();
    Pending p = id == null ? null : pending.get(id);
    if (id != null && unconfirmedIds.contains(id)) {
      // The server answered a command of a batch: it takes batches.
      unconfirmed.clear();
      unconfirmedIdLists.clear();
      unconfirmedIds.clear();
    }
    switch (frame.kind()) {
      case MESSAGE:
        return accept(frame.message());
      case DISCONNECT:
        disconnect = HeraldException.fromServer(frame.string("code"), frame.string("message"), null);
        return null;
      case PRESENCE:
        presence(frame, events);
        return null;
      case ERROR:
        if (id == null && batchRefused(frame)) {
          return null;
        }
        HeraldException error = HeraldException.fromServer(
            frame.string("code"), frame.string("message"), p != null && p.channel != null ? p.channel.name : null);
        failed(id, p, error, events);
        return null;
      default:
        break;
    }
    if (p == null) {
      return null; // the inbox opening (subscribe replies without id), a pong
    }
    if (p.kind != Kind.CONNECT) {
      pending.remove(id);
    }
    switch (p.kind) {
      case CONNECT:
        if (!ready) {
          ready = true;
          client.backoff.reset();
          boolean again = client.everConnected;
          client.everConnected = true;
          collecting = new ArrayList<>();
          for (ChannelState state : client.channels.values()) {
            subscribe(state);
          }
          sendCollected();
          if (again) {
            events.add(() -> {
              for (HeraldObserver o : client.observers) {
                o.onReconnect();
              }
            });
          }
        }
        break;
      case SUBSCRIBE:
        subscribed(p, frame, events);
        break;
      case PROBE:
        probed(p, frame);
        break;
      case ACK:
      case REFRESH:
        if (p.kind == Kind.REFRESH && frame.body().has("unsubscribed")) {
          JsonArray dropped = frame.body().getAsJsonArray("unsubscribed");
          for (JsonElement name : dropped) {
            client.channels.remove(name.getAsString());
            HeraldException e = HeraldException.fromServer(ErrorCode.FORBIDDEN.wire(),
                "the new token does not allow channel \"" + name.getAsString() + "\"", name.getAsString());
            events.add(() -> client.notifyError(e));
          }
        }
        events.add(() -> p.done.complete(null));
        break;
      default:
        break;
    }
    return null;
  }

  private void subscribed(Pending p, ServerFrame reply, List<Runnable> events) {
    ChannelState state = p.channel;
    if (client.channels.get(state.name) != state || state.subscribedOn != this) {
      send(ClientCommand.unsubscribe(nextId(), state.name)); // left while subscribing
      return;
    }
    Cursor now = new Cursor(reply.string("epoch"), reply.unsigned("seq"));
    boolean recovered = ServerFrame.bool(reply.body(), "recovered");
    if (p.since != null && recovered) {
      state.cursor = p.since;
    } else {
      if (p.since != null && p.resuming) {
        Cursor previous = p.since;
        events.add(() -> {
          for (HeraldObserver o : client.observers) {
            o.onChannelReset(state.name, previous, now);
          }
        });
      }
      state.cursor = now;
    }
    state.resumable = true;
    Cursor position = state.cursor;
    events.add(() -> {
      for (HeraldObserver o : client.observers) {
        o.onSubscribed(state.name, position, recovered);
      }
    });
  }

  /** Applies a presence frame to its channel's members and queues the observers' call. Lock held. */
  private void presence(ServerFrame frame, List<Runnable> events) {
    if (client.current != this) {
      return;
    }
    ChannelState state = client.channels.get(frame.string("channel"));
    if (state == null || !state.presence || state.subscribedOn != this) {
      return;
    }
    PresenceEvent event = state.applyPresence(frame.body());
    if (event == null) {
      return;
    }
    events.add(() -> {
      for (HeraldObserver o : client.observers) {
        o.onPresence(event);
      }
    });
  }

  private void probed(Pending p, ServerFrame history) {
    ChannelState state = p.channel;
    if (client.channels.get(state.name) != state || state.subscribedOn != this) {
      return;
    }
    long newest = history.unsigned("seq");
    long id = nextId();
    if (newest == 0) {
      subscribeFrom(id, state, null, false);
      return;
    }
    List<Message> oldest = history.messages();
    long firstRetained = oldest.isEmpty() ? newest + 1 : oldest.get(0).seq();
    long since = Math.max(Math.max(0, newest - state.catchUp), firstRetained - 1);
    subscribeFrom(id, state, new Cursor(history.string("epoch"), since), false);
  }

  private void failed(Long id, Pending p, HeraldException error, List<Runnable> events) {
    if (p != null && p.kind != Kind.CONNECT) {
      pending.remove(id);
    }
    if (p != null && (p.kind == Kind.SUBSCRIBE || p.kind == Kind.PROBE)) {
      ErrorCode code = error.errorCode();
      boolean final_ = code == ErrorCode.FORBIDDEN || code == ErrorCode.CHANNEL_INVALID
          || code == ErrorCode.TOO_MANY_SUBSCRIPTIONS || code == ErrorCode.UNAUTHORIZED;
      if (final_ && client.channels.get(p.channel.name) == p.channel) {
        client.channels.remove(p.channel.name);
      }
    }
    if (p != null && p.kind == Kind.CONNECT && !ready) {
      disconnect = error; // refused: reconnect with a fresh token after backoff
      ws.close(1000, null);
    }
    if (p != null && p.done != null) {
      events.add(() -> p.done.completeExceptionally(error));
    }
    if (p == null || p.kind != Kind.UNSUBSCRIBE) {
      events.add(() -> client.notifyError(error));
    }
  }

  /** Decides whether a message reaches the observers. Lock held. */
  private Message accept(Message message) {
    if (client.current != this) {
      return null;
    }
    if (message.isInbox()) {
      return message;
    }
    ChannelState state = client.channels.get(message.channel());
    if (state == null || state.subscribedOn != this || state.alreadySeen(message)) {
      return null;
    }
    state.cursor = message.cursor();
    state.resumable = true;
    return message;
  }

  /** Hands a message to every observer, then acks it if it is an inbox message and auto-ack is on. */
  private void deliver(Message message) {
    boolean ok = true;
    for (HeraldObserver o : client.observers) {
      try {
        o.onPush(message);
      } catch (RuntimeException e) {
        ok = false;
        client.notifyError(new HeraldException("an observer failed on " + message, e));
      }
    }
    if (ok && message.isInbox() && client.autoAck) {
      synchronized (client.lock) {
        if (!closed) {
          ack(message, new CompletableFuture<Void>());
        }
      }
    }
  }

  @Override
  public void onClosing(WebSocket webSocket, int code, String reason) {
    if (code == MESSAGE_TOO_BIG) {
      synchronized (client.lock) {
        client.batchesTooBig |= sentBatch;
      }
    }
    if (code == REVOKED_CLOSE_CODE) {
      synchronized (client.lock) {
        if (disconnect == null) {
          disconnect = HeraldException.fromServer(REVOKED, reason.isEmpty() ? "access was revoked" : reason, null);
        }
      }
    }
    webSocket.close(1000, null);
    lost(new HeraldException("the server closed the connection (" + code + ")", null));
  }

  @Override
  public void onClosed(WebSocket webSocket, int code, String reason) {
    lost(new HeraldException("the connection closed (" + code + ")", null));
  }

  @Override
  public void onFailure(WebSocket webSocket, Throwable t, Response response) {
    lost(new HeraldException("the connection failed: " + t, t));
  }

  private void lost(HeraldException transportError) {
    synchronized (client.delivery) {
      boolean wasCurrent;
      HeraldException reason;
      List<CompletableFuture<Void>> orphans = new ArrayList<>();
      synchronized (client.lock) {
        if (closed) {
          return;
        }
        closed = true;
        wasCurrent = client.current == this;
        if (wasCurrent) {
          client.current = null;
        }
        reason = disconnect != null ? disconnect : transportError;
        if (wasCurrent && REVOKED.equals(reason.code())) {
          // Revoked on purpose: reconnecting (even with a fresh token from the supplier) would undo
          // an all/sub/device revocation, so the client stops.
          client.running = false;
        }
        for (Pending p : pending.values()) {
          if (p.done != null) {
            orphans.add(p.done);
          }
        }
        pending.clear();
      }
      for (CompletableFuture<Void> f : orphans) {
        f.completeExceptionally(reason);
      }
      if (wasCurrent) {
        for (HeraldObserver o : client.observers) {
          try {
            o.onDisconnect(reason);
          } catch (RuntimeException ignored) {
            // Nothing to report it to.
          }
        }
        client.scheduleReconnect();
      }
    }
  }
}
