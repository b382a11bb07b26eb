"""``HostileServer``: one threaded HTTP server on 127.0.0.1 (real sockets) whose routes answer
as a hostile peer would — or honestly, so one test can set an honest and a hostile route side
by side.

A route is (method, path) -> ``Answer`` or a function of the ``Request`` returning one. An
``Answer``'s body is bytes, a ``Pattern`` (deterministic bytes of any size, generated as they
are sent: an 800 MB manifest costs the server nothing) or ``ENDLESS``; it can declare a length
that is not its length (``length``), send no length at all (the connection's end ends it),
drip one byte every ``drip_s`` seconds (its headers too with ``drip_headers``), and wait
before answering (``delay_s``). ``sent[path]`` counts the body bytes written to each path and
``requests`` keeps every request, with the time it arrived.

``s3_object`` and the ``oci_*`` helpers answer as an S3 API and an OCI distribution API would,
with a way to lie in each.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import socket
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

MIB = 1 << 20


@dataclass(frozen=True)
class Pattern:
    """``size`` deterministic bytes (a 1 MiB block derived from ``seed``, repeated), made as
    they are read."""

    size: int
    seed: bytes = b"hostile"

    def block(self) -> bytes:
        return _block(self.seed)

    def chunks(self, start: int = 0, end: int | None = None) -> Iterator[bytes]:
        """Bytes ``start`` up to ``end`` (exclusive; default: the size), in pieces of ≤ 1 MiB."""
        block = self.block()
        stop = self.size if end is None else end
        at = start
        while at < stop:
            offset = at % MIB
            piece = block[offset : offset + min(MIB - offset, stop - at)]
            yield piece
            at += len(piece)

    def sha256(self) -> str:
        digest = hashlib.sha256()
        for piece in self.chunks():
            digest.update(piece)
        return digest.hexdigest()

    def bytes(self) -> bytes:
        return b"".join(self.chunks())


_blocks: dict[bytes, bytes] = {}


def _block(seed: bytes) -> bytes:
    if seed not in _blocks:
        _blocks[seed] = hashlib.shake_256(seed).digest(MIB)
    return _blocks[seed]


class _Endless:
    """A body that never ends."""


ENDLESS = _Endless()


@dataclass
class Answer:
    """How to answer one request. ``length``: the Content-Length to declare ("auto": the
    body's true length; None: none, the connection's close ends the body)."""

    status: int = 200
    body: bytes | Pattern | Slice | _Endless = b""
    headers: dict[str, str] = field(default_factory=dict)
    length: int | str | None = "auto"
    drip_s: float | None = None
    drip_headers: bool = False
    delay_s: float = 0.0


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    at: float  # time.monotonic() when it arrived


Route = Answer | Callable[[Request], Answer]


class HostileServer:
    """The server; ``url`` is its base (``http://127.0.0.1:PORT``), ``address`` host:port."""

    def __init__(self) -> None:
        self.routes: dict[tuple[str, str], Route] = {}
        self.requests: list[Request] = []
        self.sent: defaultdict[str, int] = defaultdict(int)
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        hostile = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def handle_one_request(self) -> None:
                try:
                    super().handle_one_request()
                except (BrokenPipeError, ConnectionResetError, TimeoutError):
                    self.close_connection = True

            def _any(self) -> None:
                hostile._serve(self)

            do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = do_PATCH = _any

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        port = self.server.server_address[1]
        self.address = f"127.0.0.1:{port}"
        self.url = f"http://{self.address}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def route(self, method: str, path: str, answer: Route) -> None:
        with self.lock:
            self.routes[(method, path)] = answer

    def requests_to(self, path: str, method: str | None = None) -> list[Request]:
        with self.lock:
            return [r for r in self.requests if r.path == path and method in (None, r.method)]

    def close(self) -> None:
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> HostileServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- answering ------------------------------------------------------------------------

    def _serve(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        path = urlsplit(handler.path).path
        request = Request(
            handler.command, path, dict(handler.headers.items()), body, time.monotonic()
        )
        with self.lock:
            self.requests.append(request)
            route = self.routes.get((handler.command, path))
        if route is None:
            answer = Answer(404, b'{"errors":[{"code":"NOT_FOUND","message":"no route"}]}')
        elif isinstance(route, Answer):
            answer = route
        else:
            answer = route(request)
        self._answer(handler, path, answer)

    def _answer(self, handler: BaseHTTPRequestHandler, path: str, answer: Answer) -> None:
        if answer.delay_s and self.stopping.wait(answer.delay_s):
            return
        true_length = (
            len(answer.body)
            if isinstance(answer.body, bytes)
            else answer.body.size
            if isinstance(answer.body, Pattern | Slice)
            else None
        )
        declared = true_length if answer.length == "auto" else answer.length
        lines = [f"HTTP/1.1 {answer.status} Hostile"]
        lines += [f"{k}: {v}" for k, v in answer.headers.items()]
        if declared is not None:
            lines.append(f"Content-Length: {declared}")
        if declared is None or declared != true_length:
            lines.append("Connection: close")  # the body's end is the connection's
            handler.close_connection = True
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        out = handler.wfile
        if answer.drip_headers and answer.drip_s:
            for i in range(len(head)):
                out.write(head[i : i + 1])
                out.flush()
                if self.stopping.wait(answer.drip_s):
                    return
        else:
            out.write(head)
            out.flush()
        if handler.command == "HEAD":
            return
        for chunk in self._chunks(answer.body):
            if answer.drip_s:
                for i in range(len(chunk)):
                    out.write(chunk[i : i + 1])
                    out.flush()
                    self._count(path, 1)
                    if self.stopping.wait(answer.drip_s):
                        return
            else:
                out.write(chunk)
                self._count(path, len(chunk))
            if self.stopping.is_set():
                return
        out.flush()
        if handler.close_connection:
            with contextlib.suppress(OSError):
                handler.connection.shutdown(socket.SHUT_WR)

    def _chunks(self, body: bytes | Pattern | Slice | _Endless) -> Iterator[bytes]:
        if isinstance(body, bytes):
            yield body
        elif isinstance(body, Pattern | Slice):
            yield from body.chunks()
        else:
            block = _block(b"endless")
            while not self.stopping.is_set():
                yield block[: 256 * 1024]

    def _count(self, path: str, n: int) -> None:
        with self.lock:
            self.sent[path] += n


# -- an S3 API --------------------------------------------------------------------------------


def s3_object(
    data: Pattern,
    *,
    etag: str = '"e-1"',
    longer_by: int = 0,
    declared: bool = True,
    drip_s: float | None = None,
    drip_headers: bool = False,
) -> Route:
    """HEAD and ranged GET of one object (``Range: bytes=a-b``), as S3 answers them — except
    that every GET answers ``longer_by`` bytes more than it asked for (its length declared, or
    with ``declared=False`` not: the connection's end ends it), and each answer may drip."""

    def answer(request: Request) -> Answer:
        headers = {"ETag": etag, "Accept-Ranges": "bytes", "Content-Type": "binary/octet-stream"}
        if request.method == "HEAD":
            return Answer(
                200, b"", headers, length=data.size, drip_s=drip_s, drip_headers=drip_headers
            )
        wanted = request.headers.get("Range") or request.headers.get("range")
        if not wanted:
            return Answer(200, data, headers)
        start_s, _, end_s = wanted.split("=", 1)[1].partition("-")
        start, end = int(start_s), min(int(end_s), data.size - 1)
        headers["Content-Range"] = f"bytes {start}-{end}/{data.size}"
        size = end - start + 1 + longer_by
        return Answer(
            206,
            Slice(data, start, start + size),
            headers,
            length="auto" if declared else None,
            drip_s=drip_s,
            drip_headers=drip_headers,
        )

    return answer


@dataclass(frozen=True)
class Slice:
    """Bytes ``start`` up to ``stop`` of a pattern (past its end: more of the same bytes)."""

    data: Pattern
    start: int
    stop: int

    @property
    def size(self) -> int:
        return self.stop - self.start

    def chunks(self) -> Iterator[bytes]:
        yield from Pattern(max(self.stop, self.data.size), self.data.seed).chunks(
            self.start, self.stop
        )


# -- an OCI distribution API ------------------------------------------------------------------

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"


def oci_manifest_for(files: dict[str, tuple[int, str]]) -> bytes:
    """An artifact manifest listing each path -> (size, sha256) as modelreg pushes one."""
    layers = [
        {
            "mediaType": "application/vnd.modelreg.file.v1",
            "digest": f"sha256:{sha}",
            "size": size,
            "annotations": {"org.opencontainers.image.title": path},
        }
        for path, (size, sha) in files.items()
    ]
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "artifactType": "application/vnd.modelreg.record.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.empty.v1+json",
            "digest": "sha256:" + hashlib.sha256(b"{}").hexdigest(),
            "size": 2,
        },
        "layers": layers,
    }
    return json.dumps(manifest, separators=(",", ":"), sort_keys=True).encode()


def digest_of(body: bytes) -> str:
    return "sha256:" + hashlib.sha256(body).hexdigest()
