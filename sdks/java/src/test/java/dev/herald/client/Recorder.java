package dev.herald.client;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/** An observer that records what it is told, with bounded waits for each kind of event. */
class Recorder implements HeraldObserver {
  static final long WAIT_SECONDS = 20;

  final BlockingQueue<Message> messages = new LinkedBlockingQueue<>();
  final BlockingQueue<HeraldException> errors = new LinkedBlockingQueue<>();
  final BlockingQueue<HeraldException> disconnects = new LinkedBlockingQueue<>();
  final BlockingQueue<String> subscribed = new LinkedBlockingQueue<>();
  final BlockingQueue<Boolean> reconnects = new LinkedBlockingQueue<>();
  final BlockingQueue<String> resets = new LinkedBlockingQueue<>();

  @Override
  public void onPush(Message message) {
    messages.add(message);
  }

  @Override
  public void onError(HeraldException error) {
    errors.add(error);
  }

  @Override
  public void onDisconnect(HeraldException reason) {
    disconnects.add(reason);
  }

  @Override
  public void onReconnect() {
    reconnects.add(Boolean.TRUE);
  }

  @Override
  public void onSubscribed(String channel, Cursor position, boolean recovered) {
    subscribed.add(channel + " " + position + " " + recovered);
  }

  @Override
  public void onChannelReset(String channel, Cursor previous, Cursor now) {
    resets.add(channel);
  }

  static <T> T next(BlockingQueue<T> queue, String what) throws InterruptedException {
    T item = queue.poll(WAIT_SECONDS, TimeUnit.SECONDS);
    if (item == null) {
      throw new AssertionError("timed out waiting for " + what);
    }
    return item;
  }

  Message nextMessage() throws InterruptedException {
    return next(messages, "a message");
  }

  /** The next {@code n} messages. */
  List<Message> take(int n) throws InterruptedException {
    List<Message> out = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      out.add(nextMessage());
    }
    return out;
  }

  HeraldException nextError() throws InterruptedException {
    return next(errors, "an error");
  }

  HeraldException nextDisconnect() throws InterruptedException {
    return next(disconnects, "a disconnect");
  }

  String nextSubscribed() throws InterruptedException {
    return next(subscribed, "a subscribe");
  }

  void awaitReconnect() throws InterruptedException {
    next(reconnects, "a reconnect");
  }

  static List<Long> seqs(List<Message> messages) {
    List<Long> out = new ArrayList<>();
    for (Message m : messages) {
      out.add(m.seq());
    }
    return out;
  }

  static List<Long> range(long from, long to) {
    List<Long> out = new ArrayList<>();
    for (long i = from; i <= to; i++) {
      out.add(i);
    }
    return out;
  }
}
