package dev.herald.client;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/**
 * A TCP proxy on loopback in front of a server's port that records the text messages each client
 * connection sends after its WebSocket upgrade (unmasked, one list per connection), so a test sees
 * how many WebSocket messages carried its commands. The upstream port is looked up for every new
 * connection, so it follows a server restarted on the same port.
 */
final class FrameCountingProxy implements AutoCloseable {
  private final ServerSocket listener;
  private final int upstreamPort;
  private final List<Socket> sockets = Collections.synchronizedList(new ArrayList<>());
  /** Each connection's text messages from the client, in order. */
  final List<List<String>> connections = Collections.synchronizedList(new ArrayList<>());

  FrameCountingProxy(int upstreamPort) throws IOException {
    this.upstreamPort = upstreamPort;
    this.listener = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
    Thread accepting = new Thread(this::accept, "frame-counting-proxy");
    accepting.setDaemon(true);
    accepting.start();
  }

  String url() {
    return "http://127.0.0.1:" + listener.getLocalPort();
  }

  private void accept() {
    while (!listener.isClosed()) {
      try {
        Socket client = listener.accept();
        Socket server = new Socket();
        try {
          server.connect(new InetSocketAddress(InetAddress.getLoopbackAddress(), upstreamPort), 5000);
        } catch (IOException e) {
          client.close();
          continue;
        }
        sockets.add(client);
        sockets.add(server);
        List<String> messages = Collections.synchronizedList(new ArrayList<>());
        connections.add(messages);
        start(() -> recordAndCopy(client, server, messages));
        start(() -> copy(server, client));
      } catch (IOException e) {
        return; // closed
      }
    }
  }

  private static void start(Runnable body) {
    Thread t = new Thread(body, "frame-counting-proxy-relay");
    t.setDaemon(true);
    t.start();
  }

  private static void copy(Socket from, Socket to) {
    try (InputStream in = from.getInputStream(); OutputStream out = to.getOutputStream()) {
      byte[] buf = new byte[16384];
      for (int n; (n = in.read(buf)) > 0; ) {
        out.write(buf, 0, n);
        out.flush();
      }
    } catch (IOException e) {
      // the connection ended
    } finally {
      closeQuietly(from);
      closeQuietly(to);
    }
  }

  /** Forwards the client's bytes, reading its WebSocket frames after the HTTP upgrade request. */
  private static void recordAndCopy(Socket from, Socket to, List<String> messages) {
    try (InputStream in = from.getInputStream(); OutputStream out = to.getOutputStream()) {
      Reader reader = new Reader(in, out);
      int matched = 0;
      byte[] end = {'\r', '\n', '\r', '\n'};
      while (matched < 4) {
        matched = reader.next() == end[matched] ? matched + 1 : 0;
      }
      ByteArrayOutputStream fragments = new ByteArrayOutputStream();
      while (true) {
        int head = reader.next();
        int second = reader.next();
        long length = second & 0x7f;
        if (length == 126) {
          length = (reader.next() << 8) | reader.next();
        } else if (length == 127) {
          length = 0;
          for (int i = 0; i < 8; i++) {
            length = (length << 8) | reader.next();
          }
        }
        byte[] mask = new byte[4];
        boolean masked = (second & 0x80) != 0;
        for (int i = 0; masked && i < 4; i++) {
          mask[i] = (byte) reader.next();
        }
        byte[] payload = new byte[(int) length];
        for (int i = 0; i < length; i++) {
          payload[i] = (byte) (reader.next() ^ (masked ? mask[i & 3] : 0));
        }
        int opcode = head & 0x0f;
        if (opcode == 1 || opcode == 0) {
          fragments.write(payload);
          if ((head & 0x80) != 0) {
            messages.add(new String(fragments.toByteArray(), StandardCharsets.UTF_8));
            fragments.reset();
          }
        }
      }
    } catch (IOException e) {
      // the connection ended
    } finally {
      closeQuietly(from);
      closeQuietly(to);
    }
  }

  /** Reads bytes one at a time from a buffer, forwarding each chunk read. */
  private static final class Reader {
    private final InputStream in;
    private final OutputStream out;
    private final byte[] buf = new byte[16384];
    private int at;
    private int filled;

    Reader(InputStream in, OutputStream out) {
      this.in = in;
      this.out = out;
    }

    int next() throws IOException {
      if (at == filled) {
        filled = in.read(buf);
        at = 0;
        if (filled <= 0) {
          throw new IOException("closed");
        }
        out.write(buf, 0, filled);
        out.flush();
      }
      return buf[at++] & 0xff;
    }
  }

  private static void closeQuietly(Socket s) {
    try {
      s.close();
    } catch (IOException ignored) {
      // already closed
    }
  }

  @Override
  public void close() throws IOException {
    listener.close();
    synchronized (sockets) {
      for (Socket s : sockets) {
        closeQuietly(s);
      }
    }
  }
}
