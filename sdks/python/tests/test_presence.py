"""Presence on the `Subscriber` against the real server (a `room-` presence namespace): two users
see each other join and leave as `PresenceEvent`s, `members(channel)` follows, and after a
kill -9 and restart the list is the one the resubscribe lists, without a user that left while
the subscriber was away."""

from __future__ import annotations

import os
from typing import Any, Callable, Iterator, List

import pytest

from herald_client import Backoff, PresenceEvent, PresenceMember, Subscriber

from conftest import HeraldServer, within

FAST = Backoff(initial=0.05, maximum=0.5)


@pytest.fixture
def rooms() -> Iterator[HeraldServer]:
    """A server of its own whose `room-` channels are presence channels."""
    herald = HeraldServer()
    config = os.path.join(herald.tmp, "herald.toml")
    with open(config, "w") as f:
        f.write('[[namespaces]]\nprefix = "room-"\npresence = true\n')
    herald.extra_args = ["--config", config]
    herald.start()
    yield herald
    herald.cleanup()


async def presence(sub: Subscriber, wanted: Callable[[PresenceEvent], bool]) -> PresenceEvent:
    """The next presence event `wanted` accepts (other events skipped), bounded."""

    async def find() -> PresenceEvent:
        async for event in sub:
            if isinstance(event, PresenceEvent) and wanted(event):
                return event
        raise AssertionError("the subscriber ended before the presence event")

    return await within(find())


def users(members: Any) -> List[str]:
    return [m.user for m in members or []]


def is_(kind: str) -> Callable[[PresenceEvent], bool]:
    return lambda e: e.event == kind


async def test_two_users_see_each_other_join_and_leave_and_the_list_is_right_after_a_restart(
    rooms: HeraldServer,
) -> None:
    # Ada's token, minted by the server, carries her data; Bob's has none, so his subscribe's
    # member is his data.
    async with rooms.publisher() as herald:
        minted = await within(herald.create_token(sub="ada", channels=["room-*"], user_info={"name": "Ada"}))
    ada_token = minted.token
    bob_token = rooms.token(sub="bob", channels=["room-*"])
    async with Subscriber(rooms.url, ada_token, backoff=FAST) as ada:
        await within(ada.subscribe("room-1", presence=True))
        listed = await presence(ada, is_("members"))
        assert listed == PresenceEvent("room-1", "members", [PresenceMember("ada", {"name": "Ada"})])

        async with Subscriber(rooms.url, bob_token, backoff=FAST) as bob:
            await within(bob.subscribe("room-1", presence=True, member={"name": "Bob"}))
            assert users((await presence(bob, is_("members"))).members) == ["ada", "bob"]
            joined = await presence(ada, is_("join"))
            assert joined.member == PresenceMember("bob", {"name": "Bob"}) and joined.user == "bob"
            assert ada.members("room-1") == [
                PresenceMember("ada", {"name": "Ada"}),
                PresenceMember("bob", {"name": "Bob"}),
            ]
            # The server dies; Bob is gone when it is back.
            rooms.kill()
        rooms.restart()
        # No leave reached Ada, yet her list is the one her resubscribe lists.
        relisted = await presence(ada, is_("members"))
        assert users(relisted.members) == ["ada"]
        assert users(ada.members("room-1")) == ["ada"]

        # Bob comes back, then leaves.
        async with Subscriber(rooms.url, bob_token, backoff=FAST) as bob:
            await within(bob.subscribe("room-1", presence=True, member={"name": "Bob"}))
            await presence(ada, is_("join"))
            assert users(ada.members("room-1")) == ["ada", "bob"]
        left = await presence(ada, is_("leave"))
        assert left.user == "bob" and users(left.members) == ["ada"]
        assert users(ada.members("room-1")) == ["ada"]

        # A channel without presence has no list; an unsubscribed one neither.
        await within(ada.subscribe("room-2"))
        assert ada.members("room-2") is None
        await within(ada.unsubscribe("room-1"))
        assert ada.members("room-1") is None
