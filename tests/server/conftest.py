"""A real uvicorn serving the app on 127.0.0.1 (a free port, a thread of the test process) over
the test's registry database, and httpx clients with tokens of each role."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

import modelreg
from modelreg.api import Registry


@dataclass
class Served:
    url: str
    registry: Registry  # the test's own connection to the same database
    server: Any

    def client(self, secret: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {secret}"} if secret else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)


@contextmanager
def serving(
    db_url: str,
    *,
    public_read: bool = False,
    public_metrics: bool = False,
    max_body_bytes: int = 1 << 20,
) -> Iterator[Served]:
    """Start the server over ``db_url`` and stop it when the block ends."""
    import uvicorn

    from modelreg.server.app import create_app, server_config
    from modelreg.server.http import ServerSettings

    settings = ServerSettings(
        url=db_url,
        public_read=public_read,
        public_metrics=public_metrics,
        max_body_bytes=max_body_bytes,
    )
    # proto 0, as a socket handed over by systemd or --fd would be: asyncio does not set
    # TCP_NODELAY on its connections, the server must (test_accepted_connections_have_…).
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    server = uvicorn.Server(server_config(create_app(settings), "127.0.0.1", port))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the server did not start")
        time.sleep(0.01)
    try:
        yield Served(f"http://127.0.0.1:{port}", modelreg.open(db_url), server)
    finally:
        server.should_exit = True
        thread.join(timeout=20)
        listener.close()


@pytest.fixture
def served(db_url: str) -> Iterator[Served]:
    """The server over a fresh registry (SQLite and PostgreSQL), reads need a token."""
    with serving(db_url) as s:
        yield s


@pytest.fixture
def tokens(served: Served) -> dict[str, str]:
    """A secret per role, named after the role's user: reader-rita, verifier-vic, releaser-rae."""
    names = {"reader": "reader-rita", "verifier": "verifier-vic", "releaser": "releaser-rae"}
    return {
        role: served.registry.create_token(name, role, actor="admin").secret
        for role, name in names.items()
    }


@pytest.fixture
def client_of(
    served: Served, tokens: dict[str, str]
) -> Iterator[Callable[[str | None], httpx.Client]]:
    """``client_of("releaser")``: an httpx client sending that role's token (None: none)."""
    opened: list[httpx.Client] = []

    def make(role: str | None) -> httpx.Client:
        client = served.client(tokens[role] if role else None)
        opened.append(client)
        return client

    yield make
    for client in opened:
        client.close()
