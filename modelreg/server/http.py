"""What the HTTP API and the dashboard share: the settings, the security headers, how an error
becomes an HTTP status and a JSON (or HTML) answer, and what a request names (a record ref)."""

# No ``from __future__ import annotations``: FastAPI reads annotations at run time.

import logging
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING
from urllib.parse import parse_qs

from fastapi.responses import Response
from pydantic import BaseModel

from modelreg.errors import (
    PARAMETERS,
    AmbiguousRecord,
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
from modelreg.limits import RECORD_REF_MAX
from modelreg.schemas.manifest import HANDLE_RE
from modelreg.schemas.output import (
    ErrorBody,
    ErrorOutput,
    StepOut,
)
from modelreg.steps import Step

if TYPE_CHECKING:
    from modelreg.api import Registry

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
# diff/fit also accept a manifest .json file on this host, which a client must not name. At
# least 4 hex digits, at most RECORD_REF_MAX characters in all (limits.py).
_RECORD_REF_RE = re.compile(rf"r_[0-9a-f]{{4,{RECORD_REF_MAX - 2}}}|[0-9a-f]{{4,{RECORD_REF_MAX}}}")


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


def error_json(
    status: int, code: str, message: str, hint: str | None, step: Step | None = None
) -> Response:
    from modelreg.secrets import redact_secrets

    message, hint = redact_secrets(message), redact_secrets(hint) if hint else hint
    body = ErrorOutput(
        error=ErrorBody(code=code, message=message, hint=hint, next=StepOut.of(step))
    )
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


# -- request bodies -------------------------------------------------------------------------


def _cookie(header: str, name: str) -> str | None:
    from http.cookies import CookieError, SimpleCookie

    try:
        jar = SimpleCookie(header)
    except CookieError:
        return None
    morsel = jar.get(name)
    return morsel.value if morsel is not None and morsel.value else None


def record_ref(value: str) -> str:
    """A record id or id prefix from a URL (never a file path): 422 otherwise."""
    if not _RECORD_REF_RE.fullmatch(value):
        raise InvalidInput(
            f"{value[:80]!r} is not a record id or id prefix", "give r_ and at least 4 hex digits"
        )
    return value


def record_or_handle(registry: "Registry", value: str) -> str:
    """A record id or id prefix, or a model's handle (``acme/chat@v3``, a version; or
    ``acme/chat@release-14``, a promotion's label), from a query or a body: 422 otherwise.
    (A path segment cannot hold the handle's slash.) A handle is resolved here, to the id of
    the record it names (404 when it names none): what the API is handed is a record, never a
    string a library function could take for a file (``fit`` and ``diff`` also read manifest
    and artifact paths, and a label may hold a dot)."""
    if HANDLE_RE.fullmatch(value):
        return registry.get(value).id
    if not _RECORD_REF_RE.fullmatch(value):
        raise InvalidInput(
            f"{value[:80]!r} is not a record id, id prefix or handle",
            "give r_ and at least 4 hex digits, MODEL@vN or MODEL@LABEL",
        )
    return value


@cache
def static_file(name: str) -> bytes:
    return resources.files("modelreg.server").joinpath("static", name).read_bytes()


def parse_form(body: bytes) -> dict[str, str]:
    """An ``application/x-www-form-urlencoded`` body (the login form) as a dict."""
    return {k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace")).items()}
