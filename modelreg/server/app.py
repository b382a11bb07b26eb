"""The HTTP application: the JSON API under ``/api/v1``, the dashboard, and how errors and
roles map to HTTP.

Every endpoint: parse → one ``Registry`` call → the output model ``--json`` prints (serialized
once, not re-validated). Errors:

- ``Unauthorized`` → 401 (with ``WWW-Authenticate: Bearer``), ``Forbidden`` → 403;
- not found (record, model, target) → 404; unknown routes → 404, wrong method → 405;
- bad input (``InvalidInput``, ambiguous prefixes, malformed query values or bodies) → 422 with
  one message;
- not deployable, no rollback candidate, digest mismatch → 409; the deploy gate answers 409
  with its reasons when it does not pass;
- registry unreachable or on another schema → 503 (``Retry-After`` when unreachable);
- a request body over the limit → 413, a body without a length → 411, both before it is read.

All in the JSON error shape of ``--json`` (``ErrorOutput``); dashboard pages get the same
status with an HTML page. Every response carries a strict Content-Security-Policy: the
dashboard is server-rendered HTML with inline SVG and one packaged stylesheet, no script.
"""

# No ``from __future__ import annotations`` here: FastAPI reads the endpoints' annotations at
# run time, and the role dependencies (``Reader``, ``Releaser``…) are local to ``_install_api``.
import json
import logging
import os
import re
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from datetime import date
from functools import cache
from importlib import resources
from typing import Annotated, Any, Literal
from urllib.parse import parse_qs, quote

from fastapi import Depends, FastAPI, Query, Request
from fastapi import Path as PathParam
from fastapi.exceptions import RequestValidationError
from fastapi.responses import RedirectResponse, Response
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from modelreg import api
from modelreg.errors import (
    PARAMETERS,
    AmbiguousRecord,
    ErrorCode,
    Forbidden,
    IntegrityError,
    InvalidInput,
    ModelregError,
    NoRollbackCandidate,
    NotDeployable,
    NotFetchable,
    NotFound,
    RegistryUnavailable,
    SchemaMismatch,
    Unauthorized,
)
from modelreg.process import tune_collector
from modelreg.schemas.output import (
    AddOutput,
    DiffOutput,
    ErrorBody,
    ErrorOutput,
    FitOutput,
    GateOutput,
    HistoryOutput,
    ImportedRunsOutput,
    ListOutput,
    LocationsOutput,
    MatrixOutput,
    PromoteOutput,
    RollbackOutput,
    SearchOutput,
    ShowOutput,
    StateChangeOutput,
    StatusOutput,
    TargetsOutput,
    TrendOutput,
    UploadRunOutput,
    WebhookCreateOutput,
    WebhookRemoveOutput,
    WebhooksOutput,
)
from modelreg.schemas.verification import CheckResult
from modelreg.server.auth import COOKIE, Caller, authorize, bearer_secret
from modelreg.tokens import Permission

log = logging.getLogger("modelreg.server")

API = "/api/v1"
CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
# The library's parameter names (``errors.PARAMETERS``) are this API's query and body fields.
_PARAMETER_NAMES = {name: name for name in PARAMETERS}
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
]
# A record reference over HTTP is a record id or id prefix — never a path: the library's
# diff/fit also accept a manifest .json file on this host, which a client must not name.
_RECORD_REF_RE = re.compile(r"(r_)?[0-9a-f]{4,64}")


@dataclass(frozen=True)
class ServerSettings:
    url: str | None = None  # the registry (default: $MODELREG_DATABASE_URL, else SQLite)
    public_read: bool = False
    public_metrics: bool = False  # GET /metrics without a token (else a reader's token)
    metrics: bool = True  # count and time every request, and serve GET /metrics
    max_body_bytes: int = 16 << 20
    threads: int = 8  # requests handled at once, per process
    webhooks: bool = True  # send the webhooks' outbox from a thread of each process


# -- errors ---------------------------------------------------------------------------------

_STATUS: list[tuple[type[ModelregError], int]] = [
    (Unauthorized, 401),
    (Forbidden, 403),
    (NotFound, 404),
    (AmbiguousRecord, 422),
    (NotDeployable, 409),
    (NoRollbackCandidate, 409),
    (IntegrityError, 409),
    (NotFetchable, 409),
    (RegistryUnavailable, 503),
    (SchemaMismatch, 503),
    (InvalidInput, 422),
]


def http_status(exc: ModelregError) -> int:
    """The HTTP status of a modelreg error (first match in ``_STATUS``; 422 otherwise)."""
    return next((status for kind, status in _STATUS if isinstance(exc, kind)), 422)


def error_json(status: int, code: str, message: str, hint: str | None) -> Response:
    from modelreg.secrets import redact_secrets

    message, hint = redact_secrets(message), redact_secrets(hint) if hint else hint
    body = ErrorOutput(error=ErrorBody(code=code, message=message, hint=hint))
    headers = {}
    if status == 401:
        headers["WWW-Authenticate"] = 'Bearer realm="modelreg"'
    if status == 503:
        headers["Retry-After"] = "5"
    return Response(
        body.model_dump_json(), status_code=status, media_type="application/json", headers=headers
    )


def json_response(output: BaseModel, status: int = 200) -> Response:
    """An output model as the response body: serialized once, exactly as ``--json``."""
    from modelreg.textsafe import for_json

    # Bidi overrides and C1 controls as \u escapes: the same JSON, harmless printed raw.
    return Response(
        for_json(output.model_dump_json()), status_code=status, media_type="application/json"
    )


def _first_validation_error(exc: RequestValidationError) -> str:
    errors = exc.errors()
    if not errors:
        return "invalid request"
    first = errors[0]
    loc = [str(p) for p in first.get("loc", ())]
    where = loc[0] if loc else "request"
    name = ".".join(loc[1:]) or where
    label = {"query": "query parameter", "path": "path parameter", "body": "body field"}.get(
        where, where
    )
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{label} {name!r}: {first.get('msg', 'invalid')}{more}"


# -- request bodies -------------------------------------------------------------------------


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PromoteInput(_In):
    target: str = Field(min_length=1, max_length=100)
    why: str | None = Field(default=None, max_length=10_000)
    owner: str | None = Field(default=None, max_length=1_000, description="Who answers for it.")
    limitations: list[str] = Field(
        default_factory=list, max_length=100, description="Its known limitations."
    )
    retest_by: date | None = Field(default=None, description="Re-test it by this day (UTC).")
    accept_relaxed_gate: bool = Field(
        default=False,
        description="Accept (with why) passes under a gate weakened after the record failed it.",
    )


class ReasonInput(_In):
    why: str = Field(min_length=1, max_length=10_000)


class WebhookInput(_In):
    url: str = Field(min_length=1, max_length=2000, description="http:// or https://")
    events: list[str] = Field(
        default=["promote", "rollback", "hold", "release", "retire", "verify"],
        min_length=1,
        max_length=20,
        description="Event kinds (modelreg.webhooks.EVENTS).",
    )
    secret: str | None = Field(
        default=None,
        min_length=16,
        max_length=200,
        description="Sign with this secret (else a new one, in the answer only).",
    )


class RollbackInput(_In):
    model: str = Field(min_length=1, max_length=200)
    target: str = Field(min_length=1, max_length=100)
    why: str = Field(min_length=1, max_length=10_000)
    to: str | None = Field(
        default=None, min_length=1, max_length=32, description="Roll back to this record."
    )


class AddManifestInput(_In):
    """The output of ``modelreg inspect --json`` (``record_id`` and ``manifest``), with the
    locations the artifact's bytes can be fetched from."""

    manifest: dict[str, Any]
    record_id: str | None = Field(default=None, max_length=64)
    schema_version: int | None = None
    locations: list[str] = Field(default_factory=list, max_length=100)


class LocationsInput(_In):
    urls: list[str] = Field(min_length=1, max_length=100)


class RunUpload(_In):
    """One verification run produced on a target host (the checks of ``verify --json``, the
    host and the runtime fingerprint). Stored as uploaded evidence; it counts only when the
    target trusts verifier keys and ``envelope`` — the run's DSSE-signed in-toto statement
    (``verify --sign-key``, shown by ``modelreg attest``) — verifies with one of them and
    covers exactly these checks, this fingerprint and the record's files."""

    target: str = Field(min_length=1, max_length=100)
    host: str = Field(min_length=1, max_length=200)
    fingerprint: dict[str, str] = Field(default_factory=dict, max_length=200)
    checks: list[CheckResult] = Field(min_length=1, max_length=100)
    envelope: dict[str, Any] | None = Field(default=None)


# -- the ASGI wrapper: body limits and security headers, before FastAPI sees the request -----

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class Guard:
    """Refuses a request body larger than the limit (413), of unknown length (411), or framed
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
        length: bytes | None = None
        chunked = False
        for name, value in scope["headers"]:
            if name == b"content-length":
                length = value
            elif name == b"transfer-encoding":
                chunked = True
        refusal: tuple[int, str, str, str | None] | None = None
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
            status, code, message, hint = refusal
            response = error_json(status, code, message, hint)
            response.headers["Connection"] = "close"
            if status == 401:
                response.headers["WWW-Authenticate"] = "Bearer"
            await response(scope, receive, send_with_headers)
            return
        await self.app(scope, receive, send_with_headers)

    async def _refuse_writer(self, scope: Scope) -> tuple[int, str, str, str | None] | None:
        """Why this caller may not send a body (None: it may) — decided before it is read."""
        if self.writer is None or scope.get("path") in ("/login", "/logout"):
            return None
        import anyio.to_thread

        try:
            await anyio.to_thread.run_sync(self.writer, scope)
        except (Unauthorized, Forbidden) as exc:
            status = 401 if isinstance(exc, Unauthorized) else 403
            return status, exc.code.value, *exc.worded(_PARAMETER_NAMES)
        except ModelregError as exc:
            return 503, exc.code.value, *exc.worded(_PARAMETER_NAMES)
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


def create_app(settings: ServerSettings, registry: api.Registry | None = None) -> ASGIApp:
    """The ASGI application over the registry named by ``settings`` (opened now, so an
    unreachable or outdated registry is reported before serving)."""
    registry = registry or api.open(settings.url)
    app = FastAPI(
        title="modelreg",
        version=__import__("modelreg").__version__,
        description="The registry's JSON API: the output models of `modelreg … --json`.",
        openapi_url=f"{API}/openapi.json",
        docs_url=None,  # Swagger UI and ReDoc load scripts from a CDN: nothing from the internet
        redoc_url=None,
    )
    from modelreg.server.metrics import Metrics

    app.state.registry = registry
    app.state.settings = settings
    app.state.metrics = metrics = Metrics(registry) if settings.metrics else None
    _install_error_handlers(app)
    _install_api(app, registry, settings)
    from modelreg.server.dashboard import install_dashboard

    install_dashboard(app, registry, settings)

    def writer(scope: Scope) -> None:
        """The caller of a request with a body may do what that endpoint does (the endpoint
        checks again; this decides before the body is read)."""
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        secret = bearer_secret(headers.get("authorization"))
        if secret is None:
            secret = _cookie(headers.get("cookie", ""), COOKIE)
        authorize(registry, secret, _permission_of(scope.get("path", "")), public_read=False)

    return Guard(app, settings.max_body_bytes, settings.threads, writer, metrics)


_DECIDE = ("promote", "hold", "release", "retire", "rollback", "webhooks")


def _permission_of(path: str) -> Permission:
    """What a request with a body to ``path`` needs (every API write; see the endpoints)."""
    last = path.rstrip("/").rsplit("/", 1)[-1]
    if last in _DECIDE:
        return Permission.DECIDE
    if last == "runs":
        return Permission.UPLOAD_RUN
    return Permission.ADD


def _cookie(header: str, name: str) -> str | None:
    from http.cookies import CookieError, SimpleCookie

    try:
        jar = SimpleCookie(header)
    except CookieError:
        return None
    morsel = jar.get(name)
    return morsel.value if morsel is not None and morsel.value else None


def _is_page(request: Request) -> bool:
    return not request.url.path.startswith(API) and request.url.path != "/metrics"


def _install_error_handlers(app: FastAPI) -> None:
    from modelreg.server.dashboard import error_page

    @app.exception_handler(ModelregError)
    async def modelreg_error(request: Request, exc: ModelregError) -> Response:
        status = http_status(exc)
        if status == 401 and _is_page(request):
            return RedirectResponse(f"/login?next={quote(request.url.path)}", status_code=303)
        if _is_page(request):
            return error_page(status, *exc.worded(_PARAMETER_NAMES))
        return error_json(status, exc.code.value, *exc.worded(_PARAMETER_NAMES))

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> Response:
        message = _first_validation_error(exc)
        if _is_page(request):
            return error_page(422, message, None)
        return error_json(422, ErrorCode.INVALID_INPUT.value, message, "see /api/v1/openapi.json")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        message = {
            404: f"no such page: {request.url.path}",
            405: f"{request.method} is not allowed on {request.url.path}",
        }.get(exc.status_code, str(exc.detail))
        if exc.status_code == 400 and not _is_page(request):
            code, message = ErrorCode.INVALID_INPUT.value, f"the body is not JSON ({exc.detail})"
        response: Response
        if _is_page(request):
            response = error_page(exc.status_code, message, None)
        else:
            response = error_json(exc.status_code, code, message, "see /api/v1/openapi.json")
        for name, value in (exc.headers or {}).items():  # Allow on a 405
            response.headers[name] = value
        return response

    @app.exception_handler(Exception)
    async def internal_error(request: Request, exc: Exception) -> Response:
        from sqlalchemy.exc import DBAPIError

        from modelreg.registry.db import unavailable

        registry: api.Registry = request.app.state.registry
        if isinstance(exc, DBAPIError):
            found = unavailable(exc, registry.url)
            if found is not None:
                return error_json(503, found.code.value, found.message, found.cli_hint)
        log.exception("internal error on %s %s", request.method, request.url.path)
        message = f"internal error ({type(exc).__name__}); the server log has the details"
        if _is_page(request):
            return error_page(500, message, None)
        return error_json(500, ErrorCode.INTERNAL.value, message, None)


def record_ref(value: str) -> str:
    """A record id or id prefix from a URL (never a file path): 422 otherwise."""
    if not _RECORD_REF_RE.fullmatch(value):
        raise InvalidInput(
            f"{value[:80]!r} is not a record id or id prefix", "give r_ and at least 4 hex digits"
        )
    return value


def _install_api(app: FastAPI, registry: api.Registry, settings: ServerSettings) -> None:
    def caller(permission: Permission) -> Callable[[Request], Caller]:
        def dependency(request: Request) -> Caller:
            secret = bearer_secret(request.headers.get("authorization"))
            return authorize(registry, secret, permission, public_read=settings.public_read)

        return dependency

    Reader = Annotated[Caller, Depends(caller(Permission.READ))]
    Adder = Annotated[Caller, Depends(caller(Permission.ADD))]
    Verifier = Annotated[Caller, Depends(caller(Permission.UPLOAD_RUN))]
    Releaser = Annotated[Caller, Depends(caller(Permission.DECIDE))]
    errors: dict[int | str, dict[str, Any]] = {
        status: {"model": ErrorOutput} for status in (401, 403, 404, 409, 413, 422, 503)
    }
    errors |= {
        400: {
            "model": ErrorOutput,
            "description": "A body that is not JSON, or framed both by Content-Length and "
            "Transfer-Encoding.",
        },
        408: {"model": ErrorOutput, "description": "The body did not arrive in time."},
        411: {"model": ErrorOutput, "description": "A body without a Content-Length."},
    }
    RecordId = Annotated[
        str,
        PathParam(
            pattern=_RECORD_REF_RE.pattern.join("^$"),
            description="A record id (r_ and 12 hex digits) or a unique prefix of its hex.",
        ),
    ]
    State = Annotated[
        Literal["active", "held", "retired"] | None,
        Query(description="Only records in this state."),
    ]
    Text = Annotated[str, Query(min_length=1, max_length=200)]
    OptionalText = Annotated[str | None, Query(min_length=1, max_length=200)]

    @app.get(f"{API}/status", response_model=StatusOutput, responses=errors, tags=["read"])
    def status(_: Reader, model: OptionalText = None, target: OptionalText = None) -> Response:
        """What runs where: the production record of every (model, target), its files and
        locations, and whether it is deployable there now."""
        return Response(registry.status_json(model, target), media_type="application/json")

    @app.get(
        f"{API}/gate",
        response_model=GateOutput,
        responses={**errors, 409: {"model": GateOutput, "description": "The gate did not pass."}},
        tags=["read"],
    )
    def gate(
        _: Reader,
        model: Text,
        target: Text,
        sha256: Annotated[str, Query(min_length=1, max_length=200)],
    ) -> Response:
        """The deploy gate: 200 when ``sha256`` is a file of the production record of
        ``model`` on ``target`` and that record is deployable there now; 409 with the reasons
        otherwise."""
        result = registry.gate(model, target, sha256)
        return json_response(result, 200 if result.passed else 409)

    @app.get(f"{API}/matrix", response_model=MatrixOutput, responses=errors, tags=["read"])
    def matrix(
        _: Reader,
        q: OptionalText = None,
        offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    ) -> Response:
        """What runs where as a models × targets matrix, a page of models at a time (``q``:
        models whose id contains it)."""
        return json_response(registry.matrix(contains=q, offset=offset, limit=limit))

    @app.get(f"{API}/records", response_model=ListOutput, responses=errors, tags=["read"])
    def records(
        _: Reader,
        model: OptionalText = None,
        state: State = None,
        deployable_on: OptionalText = None,
    ) -> Response:
        """Records, oldest first (filters: model, state, deployable on a target)."""
        return json_response(registry.records(model, deployable_on=deployable_on, state=state))

    @app.post(
        f"{API}/records",
        response_model=AddOutput,
        status_code=201,
        responses=errors,
        tags=["write"],
    )
    def add_manifest(who: Adder, body: AddManifestInput) -> Response:
        """Record a manifest produced by ``modelreg inspect --json`` (201 when new, 200 when
        the registry already had it). Role: verifier or releaser."""
        added = registry.add_manifest(
            body.manifest, record_id=body.record_id, locations=body.locations, actor=who.actor
        )
        return json_response(added, 201 if added.created else 200)

    @app.get(
        f"{API}/records/{{record_id}}", response_model=ShowOutput, responses=errors, tags=["read"]
    )
    def show(_: Reader, record_id: RecordId) -> Response:
        """One record: manifest, state, production, deployability, runs with evidence."""
        return json_response(registry.show(record_ref(record_id)))

    @app.get(
        f"{API}/records/{{record_id}}/locations",
        response_model=LocationsOutput,
        responses=errors,
        tags=["read"],
    )
    def locations(_: Reader, record_id: RecordId) -> Response:
        """Where the record's bytes can be fetched."""
        return json_response(registry.locations(record_ref(record_id)))

    @app.post(
        f"{API}/records/{{record_id}}/locations",
        response_model=LocationsOutput,
        responses=errors,
        tags=["write"],
    )
    def add_locations(who: Adder, record_id: RecordId, body: LocationsInput) -> Response:
        """Add locations (no credentials in URLs). Role: verifier or releaser."""
        return json_response(registry.locate(record_ref(record_id), body.urls, actor=who.actor))

    @app.get(
        f"{API}/records/{{record_id}}/imported-runs",
        response_model=ImportedRunsOutput,
        responses=errors,
        tags=["read"],
    )
    def imported_runs(_: Reader, record_id: RecordId) -> Response:
        """The record's runs produced elsewhere (imported or uploaded), with whether each is
        the run deciding deployability on its target now."""
        return json_response(registry.imported_runs(record_ref(record_id)))

    @app.post(
        f"{API}/records/{{record_id}}/runs",
        response_model=UploadRunOutput,
        status_code=201,
        responses=errors,
        tags=["write"],
    )
    def upload_run(who: Verifier, record_id: RecordId, body: RunUpload) -> Response:
        """Upload a verification run. An unsigned run is history only; a run whose signed
        envelope verifies with a key the target trusts counts like a local one. Role:
        verifier."""
        uploaded = registry.upload_run(
            record_ref(record_id),
            body.target,
            body.checks,
            host=body.host,
            fingerprint=body.fingerprint,
            envelope=body.envelope,
            actor=who.actor,
        )
        return json_response(uploaded, 201)

    @app.post(
        f"{API}/records/{{record_id}}/promote",
        response_model=PromoteOutput,
        responses=errors,
        tags=["write"],
    )
    def promote(who: Releaser, record_id: RecordId, body: PromoteInput) -> Response:
        """Make the record production on the target (409 unless deployable there now).
        Role: releaser."""
        return json_response(
            registry.promote(
                record_ref(record_id),
                body.target,
                why=body.why,
                actor=who.actor,
                owner=body.owner,
                limitations=body.limitations,
                retest_by=body.retest_by,
                accept_relaxed_gate=body.accept_relaxed_gate,
            )
        )

    @app.post(
        f"{API}/records/{{record_id}}/hold",
        response_model=StateChangeOutput,
        responses=errors,
        tags=["write"],
    )
    def hold(who: Releaser, record_id: RecordId, body: ReasonInput) -> Response:
        """Put the record on hold. Role: releaser."""
        return json_response(registry.hold(record_ref(record_id), body.why, actor=who.actor))

    @app.post(
        f"{API}/records/{{record_id}}/release",
        response_model=StateChangeOutput,
        responses=errors,
        tags=["write"],
    )
    def release(who: Releaser, record_id: RecordId, body: ReasonInput) -> Response:
        """Release a held record, saying why. Role: releaser."""
        return json_response(registry.release(record_ref(record_id), body.why, actor=who.actor))

    @app.post(
        f"{API}/records/{{record_id}}/retire",
        response_model=StateChangeOutput,
        responses=errors,
        tags=["write"],
    )
    def retire(who: Releaser, record_id: RecordId, body: ReasonInput) -> Response:
        """Retire the record. Role: releaser."""
        return json_response(registry.retire(record_ref(record_id), body.why, actor=who.actor))

    @app.get(f"{API}/history", response_model=HistoryOutput, responses=errors, tags=["read"])
    def history(
        _: Reader,
        model: Text,
        limit: Annotated[int | None, Query(ge=1, le=1_000_000)] = None,
        since: Annotated[str | None, Query(min_length=1, max_length=60)] = None,
        target: OptionalText = None,
    ) -> Response:
        """Adds, verifications, promotions, rollbacks, holds of a model, in commit order
        (``limit``: the newest N; ``since``: an ISO 8601 date or time, or an age as 12h or 7d;
        ``target``: only events on it and those of no target)."""
        return json_response(registry.history(model, limit=limit, since=since, target=target))

    @app.get(f"{API}/search", response_model=SearchOutput, responses=errors, tags=["read"])
    def search(
        _: Reader,
        q: Annotated[str, Query(min_length=1, max_length=200)],
        limit: Annotated[int, Query(ge=1, le=200)] = 50,
    ) -> Response:
        """Records whose id starts with ``q``, or holding a file whose sha256 is or starts
        with ``q`` (8 hex digits or more); newest first."""
        return json_response(registry.search(q, limit=limit))

    @app.get(f"{API}/trend", response_model=TrendOutput, responses=errors, tags=["read"])
    def trend(_: Reader, model: OptionalText = None, record: OptionalText = None) -> Response:
        """A record's (``record``) or a model's (``model``) local runs, oldest first, with
        decode tokens/s, median time to first token and peak RSS."""
        return json_response(
            registry.trend(model=model, record=record_ref(record) if record else None)
        )

    @app.get(f"{API}/diff", response_model=DiffOutput, responses=errors, tags=["read"])
    def diff(_: Reader, a: Text, b: Text) -> Response:
        """What changed from record A to record B."""
        return json_response(registry.diff(record_ref(a), record_ref(b)))

    @app.get(f"{API}/fit", response_model=FitOutput, responses=errors, tags=["read"])
    def fit(
        _: Reader,
        record: Text,
        target: Text,
        context: Annotated[int | None, Query(ge=1, le=10_000_000)] = None,
        concurrency: Annotated[int, Query(ge=1, le=100_000)] = 1,
        kv_dtype: Annotated[str, Query(max_length=16)] = "f16",
        overhead: Annotated[float, Query(ge=0, le=100, allow_inf_nan=False)] = 0.10,
        headroom: Annotated[float, Query(ge=0, lt=1, allow_inf_nan=False)] = 0.10,
    ) -> Response:
        """Weights + KV cache + overhead against the target's memory."""
        return json_response(
            registry.fit(
                record_ref(record),
                target,
                context=context,
                concurrency=concurrency,
                kv_dtype=kv_dtype,
                overhead=overhead,
                headroom=headroom,
            )
        )

    @app.get("/metrics", include_in_schema=False)
    def metrics(request: Request) -> Response:
        """Prometheus' text exposition (``modelreg.server.metrics``): a reader's token, or
        anyone with ``--public-metrics`` (or ``--public-read``)."""
        from modelreg.server.metrics import CONTENT_TYPE

        if request.app.state.metrics is None:
            raise StarletteHTTPException(404)
        if not settings.public_metrics:
            secret = bearer_secret(request.headers.get("authorization"))
            authorize(registry, secret, Permission.READ, public_read=settings.public_read)
        return Response(request.app.state.metrics.exposition(), media_type=CONTENT_TYPE)

    @app.get(f"{API}/webhooks", response_model=WebhooksOutput, responses=errors, tags=["admin"])
    def webhooks(_: Releaser, removed: bool = False) -> Response:
        """Every webhook (never a secret) with its deliveries by status. Role: releaser."""
        return json_response(registry.webhooks(include_removed=removed))

    @app.post(
        f"{API}/webhooks", response_model=WebhookCreateOutput, responses=errors, tags=["admin"]
    )
    def add_webhook(who: Releaser, body: WebhookInput) -> Response:
        """Send events to a URL, each delivery signed with the secret in this answer (shown
        once). Role: releaser."""
        created = registry.add_webhook(body.url, body.events, secret=body.secret, actor=who.actor)
        return json_response(created, status=201)

    @app.delete(
        f"{API}/webhooks/{{webhook_id}}",
        response_model=WebhookRemoveOutput,
        responses=errors,
        tags=["admin"],
    )
    def remove_webhook(
        who: Releaser,
        webhook_id: Annotated[int, PathParam(ge=1, le=2**62)],
        why: OptionalText = None,
    ) -> Response:
        """Stop sending to a webhook; its pending deliveries are cancelled. Role: releaser."""
        return json_response(registry.remove_webhook(webhook_id, why=why, actor=who.actor))

    @app.get(f"{API}/targets", response_model=TargetsOutput, responses=errors, tags=["read"])
    def targets(_: Reader) -> Response:
        """Every target, with where it is defined (builtin, registry; local: the server's
        own targets file)."""
        return json_response(registry.targets())

    @app.get(f"{API}/rollback-plan", response_model=RollbackOutput, responses=errors, tags=["read"])
    def rollback_plan(_: Reader, model: Text, target: Text, to: OptionalText = None) -> Response:
        """The production record and the rollback candidate, with their locations (409 when
        there is no candidate); ``to``: the plan for rolling back to that record."""
        plan = registry.rollback_plan(model, target, to=to)
        if plan.decision == "no_candidate":
            raise NoRollbackCandidate.of_plan(plan)
        return json_response(plan)

    @app.post(f"{API}/rollback", response_model=RollbackOutput, responses=errors, tags=["write"])
    def rollback(who: Releaser, body: RollbackInput) -> Response:
        """Apply the rollback plan (a second call changes nothing). Role: releaser."""
        return json_response(
            registry.rollback(body.model, body.target, why=body.why, to=body.to, actor=who.actor)
        )


# -- running --------------------------------------------------------------------------------


@cache
def static_file(name: str) -> bytes:
    return resources.files("modelreg.server").joinpath("static", name).read_bytes()


def parse_form(body: bytes) -> dict[str, str]:
    """An ``application/x-www-form-urlencoded`` body (the login form) as a dict."""
    return {k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace")).items()}


PROTOCOL = "modelreg.server.protocol:NoDelayH11Protocol"
SETTINGS_VARIABLE = "MODELREG_SERVE_SETTINGS"


def server_config(
    app: ASGIApp | str, host: str, port: int, *, access_log: bool = False, workers: int = 1
) -> Any:
    """The uvicorn configuration ``serve`` (and the tests) run with: h11 on asyncio with
    TCP_NODELAY on every connection (``modelreg.server.protocol``); ``workers`` processes
    (then ``app`` is the factory's import string)."""
    import uvicorn

    return uvicorn.Config(
        app,
        host=host,
        port=port,
        http=PROTOCOL,
        loop="asyncio",
        interface="asgi3",
        lifespan="off",
        server_header=False,
        access_log=access_log,
        log_level="warning",
        backlog=2048,
        workers=workers,
        factory=isinstance(app, str),
    )


def start_deliverer(
    registry: api.Registry, interval_s: float = 2.0, stop: threading.Event | None = None
) -> threading.Thread:
    """Send the webhooks' outbox every ``interval_s`` from a daemon thread (every worker
    process runs one: the outbox's claims keep them from sending an attempt twice). A pass
    that fails (the database away) is logged and tried again. A pass does not wait for the
    webhooks' lanes: a slow receiver keeps its own lane while the others are sent to."""
    stopped = stop or threading.Event()

    def deliver() -> None:
        while not stopped.wait(interval_s):
            try:
                registry.deliver_webhooks(wait=False)
            except Exception:
                log.warning("webhook delivery pass failed", exc_info=True)

    thread = threading.Thread(target=deliver, name="modelreg-webhooks", daemon=True)
    thread.start()
    return thread


def app_from_environment() -> ASGIApp:
    """The application of a ``--workers`` process: settings from the environment the parent
    set (``MODELREG_SERVE_SETTINGS``, JSON)."""
    data = json.loads(os.environ[SETTINGS_VARIABLE])
    registry = api.open(data["url"])
    app = create_app(ServerSettings(**data), registry)
    tune_collector(freeze=True)
    if data.get("webhooks", True):
        start_deliverer(registry)
    return app


def run(
    settings: ServerSettings,
    host: str,
    port: int,
    *,
    announce: Callable[[str], None] = print,
    access_log: bool = False,
    workers: int = 1,
) -> None:
    """Serve until interrupted: one process, or ``workers`` processes sharing the socket
    (each opens the registry; the parent checks it first, so errors show before serving)."""
    import uvicorn

    if workers == 1:
        registry = api.open(settings.url)
        config = server_config(create_app(settings, registry), host, port, access_log=access_log)
        if settings.webhooks:
            start_deliverer(registry)
    else:
        api.open(settings.url)  # fail here, not in workers
        # /metrics answers every worker's counts: prometheus-client's multiprocess files.
        if settings.metrics and not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            import tempfile

            os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="modelreg-metrics-")
        os.environ[SETTINGS_VARIABLE] = json.dumps(
            {
                "url": settings.url,
                "public_read": settings.public_read,
                "public_metrics": settings.public_metrics,
                "metrics": settings.metrics,
                "max_body_bytes": settings.max_body_bytes,
                "threads": settings.threads,
                "webhooks": settings.webhooks,
            }
        )
        config = server_config(
            "modelreg.server.app:app_from_environment",
            host,
            port,
            access_log=access_log,
            workers=workers,
        )
    who = "anyone may read" if settings.public_read else "reads and writes need a token"
    announce(
        f"modelreg serve: dashboard http://{host}:{port}/ · API http://{host}:{port}{API} · "
        f"OpenAPI http://{host}:{port}{API}/openapi.json · {who}"
        + (f" · {workers} worker processes" if workers > 1 else "")
    )
    if workers == 1:
        tune_collector(freeze=True)
        uvicorn.Server(config).run()
        return
    from uvicorn.supervisors import Multiprocess

    Multiprocess(config, sockets=[config.bind_socket()]).run()
