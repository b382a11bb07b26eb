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
previous response, or the connection is answered 408 and closed (a connection that sent
nothing of a next request is just closed: it was idle, not late).

A request line and headers larger than h11's buffer (``HEAD_BYTES``) are answered 414 (the
request line alone did not fit) or 431 (the headers did not), not uvicorn's 400 for both;
malformed requests stay 400. Every one of these answers is the JSON API's error shape.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

from h11._connection import DEFAULT_MAX_INCOMPLETE_EVENT_SIZE
from uvicorn.protocols.http.h11_impl import H11Protocol

# What h11 buffers of a request before its headers are complete (uvicorn's default, h11's):
# the request line and every header, 16 KiB in all.
HEAD_BYTES = DEFAULT_MAX_INCOMPLETE_EVENT_SIZE


def _refusal(status: int, code: str, message: str) -> bytes:
    """A whole HTTP/1.1 answer that closes the connection, in the API's error shape."""
    from http import HTTPStatus

    from modelreg.server.http import SECURITY_HEADERS, error_json

    body = bytes(error_json(status, code, message, None).body)
    head = [
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}".encode(),
        b"content-type: application/json",
        f"content-length: {len(body)}".encode(),
        b"connection: close",
        *(name + b": " + value for name, value in SECURITY_HEADERS),
    ]
    return b"\r\n".join(head) + b"\r\n\r\n" + body


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
            # No complete request headers in time: 408 if part of a request came, else (an
            # idle keep-alive connection) nothing to answer.
            if self.conn.trailing_data[0]:
                self.transport.write(
                    _refusal(
                        408,
                        "request_timeout",
                        f"the request's headers took over {self.HEADER_SECONDS:.0f} s",
                    )
                )
            self.transport.close()

    def handle_events(self) -> None:
        super().handle_events()
        if self._header_deadline is not None and self.cycle is not self._waiting_for:
            self._header_deadline.cancel()  # a request's headers arrived
            self._header_deadline = None

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to a request h11 could not read: 414 or 431 when it outgrew the
        buffer before its headers ended, else 400."""
        buffered = self.conn.trailing_data[0]
        if len(buffered) > HEAD_BYTES and b"\r\n" not in buffered[:HEAD_BYTES]:
            answer = _refusal(414, "uri_too_long", f"the request line is over {HEAD_BYTES:,} bytes")
        elif len(buffered) > HEAD_BYTES:
            answer = _refusal(
                431,
                "request_header_fields_too_large",
                f"the request line and headers are over {HEAD_BYTES:,} bytes",
            )
        else:
            answer = _refusal(400, "invalid_input", "the request is not valid HTTP/1.1")
        self.transport.write(answer)
        self.transport.close()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm_header_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None
        super().connection_lost(exc)
