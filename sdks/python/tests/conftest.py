"""Test harness: starts the real `herald` binary ($HERALD_BIN) on 127.0.0.1 port 0 with a fresh
data directory, knows its keys, and can kill -9 it and start it again on the same port and data.

Every wait here is bounded (WAIT seconds); every server started is stopped by its fixture.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import queue
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable, Dict, Iterator, List, Optional, TypeVar

import pytest

from herald_client import Event, Herald, HeraldError, mint_token

T = TypeVar("T")

#: Upper bound of any single wait in these tests (seconds).
WAIT = 15.0

SDK_ROOT = Path(__file__).resolve().parent.parent
REPO_ROOT = SDK_ROOT.parent.parent
VECTORS = REPO_ROOT / "crates" / "herald-proto" / "tests" / "vectors"

API_KEY = "hk_python_sdk_test_publisher_key"
ADMIN_KEY = "python-sdk-test-admin-key"
TOKEN_SECRET = "python-sdk-test-token-secret-0123456789"

_LISTENING = re.compile(r"herald listening on (http://\S+)")
_names = itertools.count(1)


def unique(prefix: str) -> str:
    """A name no other test uses (channels, devices, apps)."""
    return f"{prefix}-{os.getpid()}-{next(_names)}"


def herald_bin() -> str:
    path = os.environ.get("HERALD_BIN") or str(REPO_ROOT / "target" / "debug" / "herald")
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"herald binary not found at {path}: build it or set HERALD_BIN")
    return path


class HeraldServer:
    """One `herald serve` process on its own data directory."""

    def __init__(self, env: Optional[Dict[str, str]] = None, args: Optional[List[str]] = None,
                 token_secret: str = TOKEN_SECRET, through: Optional[List[str]] = None) -> None:
        self.tmp = tempfile.mkdtemp(prefix="herald-py-sdk-")
        self.data = os.path.join(self.tmp, "data")
        self.extra_env = env or {}
        self.extra_args = args or []
        self.through = through or []  # a command the server runs under (`prlimit --fsize=N:`)
        self.token_secret = token_secret
        self.process: Optional[subprocess.Popen[str]] = None
        self.url = ""
        self.log: List[str] = []

    def start(self, listen: str = "127.0.0.1:0") -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("HERALD_")}
        env["HERALD_LOG"] = os.environ.get("HERALD_TEST_LOG", "warn")
        env.update(self.extra_env)
        command = [
            *self.through, herald_bin(), "serve", "--listen", listen, "--data", self.data,
            "--api-key", API_KEY, "--admin-key", ADMIN_KEY, "--token-secret", self.token_secret,
            *self.extra_args,
        ]
        self.process = subprocess.Popen(
            command, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
        )
        lines: "queue.Queue[Optional[str]]" = queue.Queue()

        def pump(stream: Any, keep: bool) -> None:
            for line in stream:
                if keep:
                    lines.put(line)
                self.log.append(line)
                del self.log[:-200]
            if keep:
                lines.put(None)

        threading.Thread(target=pump, args=(self.process.stdout, True), daemon=True).start()
        threading.Thread(target=pump, args=(self.process.stderr, False), daemon=True).start()
        deadline = time.monotonic() + WAIT
        while True:
            remaining = deadline - time.monotonic()
            try:
                line = lines.get(timeout=max(remaining, 0.01))
            except queue.Empty:
                line = None
                remaining = -1
            if line is not None:
                match = _LISTENING.search(line)
                if match:
                    self.url = match.group(1)
                    return
                continue
            self.kill()
            raise RuntimeError(f"herald did not start ({listen}): {''.join(self.log[-20:])}")

    @property
    def listen(self) -> str:
        return self.url.removeprefix("http://")

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=WAIT)
        self.process = None

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it does not exit in time."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.kill()
        self.process = None

    def restart(self) -> None:
        """Starts again on the same port and data directory (retrying the bind for a while)."""
        listen = self.listen
        deadline = time.monotonic() + WAIT
        while True:
            try:
                self.start(listen)
                return
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def token(self, **claims: Any) -> str:
        return mint_token(self.token_secret, **claims)

    def publisher(self, **options: Any) -> Herald:
        return Herald(self.url, API_KEY, admin_key=ADMIN_KEY, **options)


@pytest.fixture(scope="module")
def server() -> Iterator[HeraldServer]:
    """One server for a whole test module (each test uses its own channels)."""
    herald = HeraldServer()
    herald.start()
    yield herald
    herald.cleanup()


@pytest.fixture
def fresh_server() -> Iterator[HeraldServer]:
    """A server of its own, for tests that kill or restart it."""
    herald = HeraldServer()
    herald.start()
    yield herald
    herald.cleanup()


@pytest.fixture
async def herald(server: HeraldServer) -> AsyncIterator[Herald]:
    client = server.publisher()
    yield client
    await client.aclose()


async def within(awaitable: Awaitable[T], seconds: float = WAIT) -> T:
    """Awaits with a bound: a hung server fails the test."""
    return await asyncio.wait_for(awaitable, seconds)


async def next_event(events: Any, kind: Any = None, seconds: float = WAIT) -> Event:
    """The next event (of type `kind`, skipping others) from an async iterator, bounded."""
    async def find() -> Event:
        async for event in events:
            if kind is None or isinstance(event, kind):
                return event
        raise AssertionError(f"the subscriber ended before a {kind}")

    return await within(find(), seconds)


async def raises(awaitable: Awaitable[Any]) -> HeraldError:
    """The HeraldError an awaitable raises (bounded); fails if it raises nothing."""
    try:
        await within(awaitable)
    except HeraldError as error:
        return error
    raise AssertionError("expected a HeraldError")


