"""Remote answers that cannot cost more than they are worth: a total deadline per request and
a cap on what a body may hold.

httpx, botocore and ``http.client`` time out per socket read: a peer that sends one byte every
few seconds keeps a request alive for as long as it likes. A ``Deadline`` is the time of the
whole request. A watchdog thread shuts down every socket attached to it when it passes, so a
read blocked inside any library returns at once (an error, or the end of the stream), and
``check`` raises between reads. Each client attaches the sockets it opens (``attach``; the
current deadline of a thread is ``current()``): OCI through httpx's ``trace`` extension, S3
through its urllib3 connections, webhooks through ``http.client``'s socket.

``read_capped`` gathers a body to at most ``cap`` bytes and refuses the byte that passes it,
so a manifest that never ends costs ``cap`` bytes of memory, not its length.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import socket
import threading
import time
from collections.abc import Iterable
from types import TracebackType


class DeadlineExceeded(Exception):
    """The request's total time passed before its answer was complete."""

    def __init__(self, what: str, seconds: float) -> None:
        super().__init__(f"{what}: no complete answer within {seconds:g} s")
        self.what = what
        self.seconds = seconds


class TooLong(Exception):
    """A body longer than it may be (``cap`` bytes); raised as soon as it passes the cap."""

    def __init__(self, what: str, cap: int) -> None:
        super().__init__(f"{what} is longer than {cap:,} bytes; refused")
        self.what = what
        self.cap = cap


class Deadline:
    """A total time for one request (a context manager: the thread's ``current()`` inside).

    ``attach`` a socket the request uses: when the time passes it is shut down, which ends any
    read blocked on it. ``check`` raises ``DeadlineExceeded`` once the time has passed."""

    def __init__(self, seconds: float, what: str) -> None:
        self.seconds = seconds
        self.what = what
        self.at = time.monotonic() + seconds
        self.expired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._outer: Deadline | None = None

    def remaining(self) -> float:
        return max(0.0, self.at - time.monotonic())

    def attach(self, sock: socket.socket | None) -> None:
        """Shut ``sock`` down when the deadline passes (at once if it has)."""
        if sock is None:
            return
        with self._lock:
            self._sockets.append(sock)
            expired = self.expired
        if expired:
            _shut(sock)

    def check(self) -> None:
        if self.expired or time.monotonic() >= self.at:
            self.expired = True
            raise DeadlineExceeded(self.what, self.seconds)

    def exceeded(self) -> DeadlineExceeded:
        return DeadlineExceeded(self.what, self.seconds)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            _shut(sock)

    def __enter__(self) -> Deadline:
        self._outer = getattr(_local, "deadline", None)
        _local.deadline = self
        _watchdog.add(self)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        _watchdog.discard(self)
        _local.deadline = self._outer
        with self._lock:
            self._sockets.clear()


def current() -> Deadline | None:
    """The deadline this thread is inside, if any."""
    return getattr(_local, "deadline", None)


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # closed already, or never connected
        sock.shutdown(socket.SHUT_RDWR)


_local = threading.local()


class _Watchdog:
    """One daemon thread that expires deadlines in time order."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Deadline]] = []
        self._live: set[Deadline] = set()
        self._count = itertools.count()
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None

    def add(self, deadline: Deadline) -> None:
        with self._wake:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="modelreg-deadlines", daemon=True
                )
                self._thread.start()
            heapq.heappush(self._heap, (deadline.at, next(self._count), deadline))
            self._live.add(deadline)
            self._wake.notify()

    def discard(self, deadline: Deadline) -> None:
        with self._wake:
            self._live.discard(deadline)
            if len(self._heap) > 64 and len(self._heap) > 4 * len(self._live):
                # Requests that ended long before their deadline: forget them now.
                self._heap = [entry for entry in self._heap if entry[2] in self._live]
                heapq.heapify(self._heap)

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._heap:
                    self._wake.wait()
                at, _, deadline = self._heap[0]
                wait = at - time.monotonic()
                if wait > 0:
                    self._wake.wait(wait)
                    continue
                heapq.heappop(self._heap)
                live = deadline in self._live
                self._live.discard(deadline)
            if live:
                deadline._expire()


_watchdog = _Watchdog()


def read_capped(chunks: Iterable[bytes], cap: int, what: str) -> bytes:
    """Join ``chunks`` (as they arrive) into at most ``cap`` bytes; ``TooLong`` as soon as one
    passes the cap, before the rest is read."""
    parts: list[bytes] = []
    total = 0
    for chunk in chunks:
        total += len(chunk)
        if total > cap:
            raise TooLong(what, cap)
        parts.append(chunk)
    return b"".join(parts)
