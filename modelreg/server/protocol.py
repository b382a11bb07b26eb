"""uvicorn's h11 protocol with TCP_NODELAY set on every accepted connection.

asyncio sets TCP_NODELAY only when the listening socket's ``proto`` is IPPROTO_TCP: true of a
host/port bind through getaddrinfo, not of sockets created with ``proto`` 0 — those uvicorn
binds for ``--workers``, ``--fd``, systemd's. Their connections would hold small keep-alive
responses back (Nagle's algorithm against the client's delayed ACK: ~40 ms a response). A
module-level class, so that worker processes can import it by name.
"""

from __future__ import annotations

import socket
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol


class NoDelayH11Protocol(H11Protocol):
    def connection_made(self, transport: Any) -> None:
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().connection_made(transport)
