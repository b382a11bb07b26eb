"""The guard in front of the application: request bodies bounded before they are read (413, 411,
408, 400), the writer's role decided before its body is read, the security headers on every
answer, and every request counted and timed."""

# No ``from __future__ import annotations``: FastAPI reads annotations at run time.

import logging
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any

from modelreg.errors import (
    ErrorCode,
    Forbidden,
    ModelregError,
    Unauthorized,
)
from modelreg.server.http import _PARAMETER_NAMES, API, SECURITY_HEADERS, error_json
from modelreg.steps import Step
from modelreg.tokens import Permission

log = logging.getLogger("modelreg.server")

# The ASGI types of the wrapper (starlette's, spelled out).

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class Guard:
    """Answers a method the path does not take with 405 and every method it does take in
    ``Allow`` (whatever else the request is: a body or a token is not looked at — the app's
    router would name the methods of one of the path's routes only); refuses a request body
    larger than the limit (413), of unknown length (411), or framed
    two ways at once (Content-Length and Transfer-Encoding: 400 — h11 would read the chunked
    body whatever the length said) from its headers; a body is read only once the caller is
    known to be allowed to write (a token of a role that writes: 401 / 403 before a byte of
    it is read; ``/login``'s form is small and bounded on its own), read by this guard with
    every byte counted against the limit and a deadline (408), then handed to the app. Adds
    the security headers to every response.

    Also sets how many requests run at once (the endpoints are synchronous: they run in
    anyio's thread pool, 40 threads by default). Fewer threads contend less for the GIL and
    the database pool: at 50 concurrent clients, 8 threads gave a p99 half that of 40."""

    LOGIN_BODY_BYTES = 8 << 10
    BODY_SECONDS = 30.0

    def __init__(
        self,
        app: ASGIApp,
        max_body_bytes: int,
        threads: int = 8,
        writer: Callable[[Scope], None] | None = None,
        metrics: Any = None,
    ) -> None:
        self.app = app
        # The app's routes (starlette's, the live list), to know which methods a path takes.
        self.routes: Sequence[Any] = getattr(app, "routes", ())
        self.metrics = metrics  # server.metrics.Metrics: every request counted and timed
        self.max_body_bytes = max_body_bytes
        self.threads = threads
        self.writer = writer  # raises Unauthorized / Forbidden unless the caller may write
        self._threads_set = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self._threads_set:
            import anyio.to_thread

            anyio.to_thread.current_default_thread_limiter().total_tokens = self.threads
            self._threads_set = True
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.metrics is None:
            await self._handle(scope, receive, send)
            return
        from modelreg.server.metrics import timed

        counted, done = timed(self.metrics, scope, send)
        try:
            await self._handle(scope, receive, counted)
        finally:
            done()

    async def _handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        allowed = methods_elsewhere(self.routes, scope)
        if allowed:
            await self._not_allowed(scope, receive, send, allowed)
            return
        length: bytes | None = None
        chunked = False
        for name, value in scope["headers"]:
            if name == b"content-length":
                length = value
            elif name == b"transfer-encoding":
                chunked = True
        refusal: tuple[Any, ...] | None = None  # (status, code, message, hint[, step])
        if length is not None and chunked:
            refusal = (
                400,
                ErrorCode.INVALID_INPUT.value,
                "a request with both Content-Length and Transfer-Encoding is refused",
                None,
            )
        elif length is not None:
            if not length.isdigit():
                refusal = (
                    400,
                    ErrorCode.INVALID_INPUT.value,
                    "Content-Length is not a number",
                    None,
                )
            elif int(length) > self.max_body_bytes:
                refusal = (
                    413,
                    "payload_too_large",
                    f"request body of {int(length)} bytes is over this server's limit of "
                    f"{self.max_body_bytes} bytes",
                    None,
                )
        elif chunked:
            refusal = (411, "length_required", "send the request body with a Content-Length", None)

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        if refusal is None and length is not None and int(length) > 0:
            if scope.get("method") in ("GET", "HEAD"):
                refusal = (400, ErrorCode.INVALID_INPUT.value, "a GET carries no body", None)
            else:
                refusal = await self._refuse_writer(scope)
            if refusal is None:
                limit = self.max_body_bytes
                if scope.get("path") in ("/login", "/logout"):  # forms of anyone: small
                    limit = min(limit, self.LOGIN_BODY_BYTES)
                body, refusal = await self._read_body(receive, min(int(length), limit), limit)
                if refusal is None:
                    receive = _replay(body, receive)
        if refusal is not None:
            status, code, message, hint, *step = refusal
            response = error_json(status, code, message, hint, step[0] if step else None)
            response.headers["Connection"] = "close"
            if status == 401:
                response.headers["WWW-Authenticate"] = "Bearer"
            await response(scope, receive, send_with_headers)
            return
        await self.app(scope, receive, send_with_headers)

    async def _not_allowed(
        self, scope: Scope, receive: Receive, send: Send, allowed: list[str]
    ) -> None:
        path, method = scope.get("path", ""), scope.get("method", "")
        message = f"{method} is not allowed on {path}"
        response: Any
        if path.startswith(API) or path == "/metrics":
            response = error_json(405, "method_not_allowed", message, "see /api/v1/openapi.json")
        else:
            from modelreg.server.dashboard import error_page

            response = error_page(405, message, None)
        response.headers["Allow"] = ", ".join(allowed)
        response.headers["Connection"] = "close"  # a body it may carry is not read

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        await response(scope, receive, send_with_headers)

    async def _refuse_writer(
        self, scope: Scope
    ) -> tuple[int, str, str, str | None, Step | None] | None:
        """Why this caller may not send a body (None: it may) — decided before it is read."""
        if self.writer is None or scope.get("path") in ("/login", "/logout"):
            return None
        import anyio.to_thread

        try:
            await anyio.to_thread.run_sync(self.writer, scope)
        except (Unauthorized, Forbidden) as exc:
            status = 401 if isinstance(exc, Unauthorized) else 403
            return status, exc.code.value, *exc.worded(_PARAMETER_NAMES), exc.step
        except ModelregError as exc:
            return 503, exc.code.value, *exc.worded(_PARAMETER_NAMES), exc.step
        return None

    async def _read_body(
        self, receive: Receive, expected: int, limit: int
    ) -> tuple[bytes, tuple[int, str, str, str | None] | None]:
        """The body, every byte counted as it arrives (413 past ``limit``, 408 past the
        deadline, 400 when the client went away or sent other than it announced)."""
        import anyio

        chunks: list[bytes] = []
        size = 0
        # 30 s, and more for a large body: at least 256 KiB/s is asked of a slow link.
        seconds = max(self.BODY_SECONDS, expected / (256 << 10))
        try:
            with anyio.fail_after(seconds):
                while True:
                    message = await receive()
                    if message["type"] != "http.request":
                        return b"", (
                            400,
                            ErrorCode.INVALID_INPUT.value,
                            "the body was cut off",
                            None,
                        )
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > limit:
                        return b"", (
                            413,
                            "payload_too_large",
                            f"request body over this server's limit of {limit} bytes",
                            None,
                        )
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        break
        except TimeoutError:
            return b"", (
                408,
                "request_timeout",
                f"the body took over {seconds:.0f} s",
                None,
            )
        if size != expected:
            return b"", (
                400,
                ErrorCode.INVALID_INPUT.value,
                "the body is not its Content-Length",
                None,
            )
        return b"".join(chunks), None


# The methods of RFC 9110 (and PATCH): those a path may be asked which it takes.
_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "CONNECT")


def methods_elsewhere(routes: Sequence[Any], scope: Scope) -> list[str]:
    """The methods the request's path takes when its own method is not one of them; empty
    when a route takes the request, or when no route has the path (the app's 404). Routes are
    asked as the app's router asks them (FastAPI wraps an included router in one route)."""
    from starlette.routing import Match

    def taken(method: str) -> bool:
        asked = {**scope, "method": method}
        return any(route.matches(asked)[0] is Match.FULL for route in routes)

    if taken(scope.get("method", "")):
        return []
    return [method for method in _METHODS if taken(method)]


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands the app the body already read, then the client's own."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


# -- the application ------------------------------------------------------------------------


_DECIDE = ("promote", "hold", "release", "retire", "rollback", "webhooks")


def _permission_of(path: str) -> Permission:
    """What a request with a body to ``path`` needs (every API write; see the endpoints)."""
    last = path.rstrip("/").rsplit("/", 1)[-1]
    if last in _DECIDE:
        return Permission.DECIDE
    if last == "runs":
        return Permission.UPLOAD_RUN
    return Permission.ADD
