"""uvicorn's h11 protocol with TCP_NODELAY set on every accepted connection, and a deadline
for a request's headers.

asyncio sets TCP_NODELAY only when the listening socket's ``proto`` is IPPROTO_TCP: true of a
host/port bind through getaddrinfo, not of sockets created with ``proto`` 0 — those uvicorn
binds for ``--workers``, ``--fd``, systemd's. Their connections would hold small keep-alive
responses back (Nagle's algorithm against the client's delayed ACK: ~40 ms a response). A
module-level class, so that worker processes can import it by name.

uvicorn cancels its keep-alive timer on every byte received, so a client that trickles a
request's headers a byte at a time holds its connection (and a slot) forever. Here the headers
of each request must be complete within ``HEADER_SECONDS`` of the connection opening or of the
previous response, or the connection is closed.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol


class NoDelayH11Protocol(H11Protocol):
    HEADER_SECONDS = 10.0

    def connection_made(self, transport: Any) -> None:
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().connection_made(transport)
        self._waiting_for: Any = None  # the cycle whose successor's headers are awaited
        self._header_deadline: asyncio.TimerHandle | None = None
        self._arm_header_deadline()

    def _arm_header_deadline(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
        self._waiting_for = self.cycle
        self._header_deadline = self.loop.call_later(self.HEADER_SECONDS, self._headers_late)

    def _headers_late(self) -> None:
        self._header_deadline = None
        idle = self.cycle is None or self.cycle.response_complete  # no request in flight
        if self.cycle is self._waiting_for and idle and not self.transport.is_closing():
            self.transport.close()  # no complete request headers in time

    def handle_events(self) -> None:
        super().handle_events()
        if self._header_deadline is not None and self.cycle is not self._waiting_for:
            self._header_deadline.cancel()  # a request's headers arrived
            self._header_deadline = None

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm_header_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None
        super().connection_lost(exc)
