package dev.herald.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import dev.herald.client.model.ChannelPresence;
import dev.herald.client.model.TokenRequest;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Presence on {@link HeraldClient} against the real server (a {@code room-} presence namespace): two
 * users see each other join and leave ({@link HeraldObserver#onPresence}), {@link
 * HeraldClient#members} follows, and after a SIGKILL and restart the list is the one the resubscribe
 * lists, without a user that left while the client was away.
 */
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class PresenceTest {
  /** Records presence events. */
  static final class PresenceRecorder extends Recorder {
    final BlockingQueue<PresenceEvent> presence = new LinkedBlockingQueue<>();

    @Override
    public void onPresence(PresenceEvent event) {
      presence.add(event);
    }

    /** The next presence event of {@code kind} (others skipped). */
    PresenceEvent next(PresenceEvent.Kind kind) throws InterruptedException {
      while (true) {
        PresenceEvent event = next(presence, "a presence " + kind);
        if (event.kind() == kind) {
          return event;
        }
      }
    }
  }

  static List<String> users(List<ChannelPresence.Member> members) {
    List<String> out = new ArrayList<>();
    for (ChannelPresence.Member m : members) {
      out.add(m.user);
    }
    return out;
  }

  static HeraldClient client(HeraldServer server, String token, Recorder recorder) {
    HeraldClient client = HeraldClient.builder(server.url()).token(token).backoff(50, 500).build();
    client.register(recorder);
    return client;
  }

  @Test
  void twoUsersSeeEachOtherJoinAndLeaveAndTheListIsRightAfterARestart() throws Exception {
    Path config = Files.createTempFile("herald-java-presence-", ".toml");
    Files.write(config, "[[namespaces]]\nprefix = \"room-\"\npresence = true\n".getBytes("UTF-8"));
    try (HeraldServer server = HeraldServer.start(
        Collections.<String, String>emptyMap(), Arrays.asList("--config", config.toString()))) {
      // Ada's token, minted by the server, carries her data; Bob's has none, so his subscribe's
      // member is his data.
      PublisherClient publisher = new PublisherClient(server.url(), HeraldServer.API_KEY);
      String adaToken = publisher.mintToken(new TokenRequest().sub("ada")
          .channels(Collections.singletonList("room-*")).userInfo(Map.<String, Object>of("name", "Ada"))).token;
      String bobToken = SubscriberTest.token("bob", 3600, "room-*");

      PresenceRecorder ada = new PresenceRecorder();
      HeraldClient adaClient = client(server, adaToken, ada);
      adaClient.joinPresenceChannel("room-1");
      assertNull(adaClient.members("room-1"), "nothing listed before the server answers");
      adaClient.start();
      HeraldClient bobClient = null;
      try {
        PresenceEvent listed = ada.next(PresenceEvent.Kind.MEMBERS);
        assertEquals("room-1", listed.channel());
        assertEquals(Collections.singletonList("ada"), users(listed.members()));
        assertEquals("Ada", listed.members().get(0).data.get("name").getAsString());

        PresenceRecorder bob = new PresenceRecorder();
        bobClient = client(server, bobToken, bob);
        bobClient.joinPresenceChannel("room-1", 0, Map.of("name", "Bob"));
        bobClient.start();
        assertEquals(Arrays.asList("ada", "bob"), users(bob.next(PresenceEvent.Kind.MEMBERS).members()));
        PresenceEvent joined = ada.next(PresenceEvent.Kind.JOIN);
        assertEquals("bob", joined.user());
        assertEquals("Bob", joined.member().data.get("name").getAsString());
        assertEquals(Arrays.asList("ada", "bob"), users(adaClient.members("room-1")));

        // The server dies; Bob is gone when it is back. No leave reaches Ada, yet her list is the
        // one her resubscribe lists.
        server.kill();
        ada.nextDisconnect();
        bobClient.stop();
        server.restart();
        assertEquals(Collections.singletonList("ada"), users(ada.next(PresenceEvent.Kind.MEMBERS).members()));
        assertEquals(Collections.singletonList("ada"), users(adaClient.members("room-1")));

        // Bob comes back, then leaves.
        bobClient = client(server, bobToken, new PresenceRecorder());
        bobClient.joinPresenceChannel("room-1", 0, Map.of("name", "Bob"));
        bobClient.start();
        ada.next(PresenceEvent.Kind.JOIN);
        assertEquals(Arrays.asList("ada", "bob"), users(adaClient.members("room-1")));
        bobClient.stop();
        PresenceEvent left = ada.next(PresenceEvent.Kind.LEAVE);
        assertEquals("bob", left.user());
        assertEquals(Collections.singletonList("ada"), users(left.members()));
        assertEquals(Collections.singletonList("ada"), users(adaClient.members("room-1")));

        // A channel without presence has no list; a channel left neither.
        adaClient.joinChannel("room-2", 0);
        assertNull(adaClient.members("room-2"));
        adaClient.leaveChannel("room-1");
        assertNull(adaClient.members("room-1"));
      } finally {
        adaClient.stop();
        if (bobClient != null) {
          bobClient.stop();
        }
        Files.deleteIfExists(config);
      }
    }
  }
}
