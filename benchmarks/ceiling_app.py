"""The ceiling of ``modelreg serve`` here: a raw ASGI app answering every request with one
captured response of ours (status, headers, body bytes), under the uvicorn configuration
``modelreg serve`` runs with (``modelreg.server.app.server_config``: the same HTTP protocol
class with TCP_NODELAY, loop, interface, lifespan, server header, access log, backlog, worker
processes). No framework, no routing, no database: what uvicorn alone costs per request.

    MODELREG_CEILING_RESPONSE=response.json python -m benchmarks.ceiling_app --port P \\
        [--host 127.0.0.1] [--workers N]

The file (written by ``benchmarks.bench_server``): ``{"status": 200, "headers": [[name,
value], ...], "body_base64": "..."}`` — the headers as ours sent them, less those uvicorn adds
itself (``date``) and the connection's own (``connection``, ``transfer-encoding``).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

VARIABLE = "MODELREG_CEILING_RESPONSE"

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def create() -> ASGIApp:
    """The app (a factory, as uvicorn's worker processes import it by name)."""
    with open(os.environ[VARIABLE], encoding="utf-8") as fh:
        data = json.load(fh)
    status = int(data["status"])
    body = base64.b64decode(data["body_base64"])
    headers = [(name.encode("latin-1"), value.encode("latin-1")) for name, value in data["headers"]]
    if not any(name == b"content-length" for name, _ in headers):
        headers.append((b"content-length", str(len(body)).encode()))

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return app


_app: ASGIApp | None = None


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    """The same app for ``uvicorn benchmarks.ceiling_app:app`` (the response read on the
    first request). Its command line has no ``--http`` for ours' protocol class: with
    ``--workers``, no TCP_NODELAY (see ``modelreg.server.protocol``) — ``main`` is the ceiling."""
    global _app
    if _app is None:
        _app = create()
    await _app(scope, receive, send)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args(argv)
    import uvicorn

    from modelreg.server.app import server_config

    # As ``modelreg.server.app.run``: the app itself in one process, its import string for
    # worker processes sharing one socket.
    if args.workers == 1:
        uvicorn.Server(server_config(create(), args.host, args.port)).run()
        return
    from uvicorn.supervisors import Multiprocess

    config = server_config(
        "benchmarks.ceiling_app:create", args.host, args.port, workers=args.workers
    )
    Multiprocess(config, sockets=[config.bind_socket()]).run()


if __name__ == "__main__":
    main()
