"""How an exception becomes an answer: a JSON error on the API (``http.error_json``), an error
page on the dashboard, a redirect to the login page for a page that needs a token."""

# No ``from __future__ import annotations``: FastAPI reads annotations at run time.

import logging
from urllib.parse import quote

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import RedirectResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from modelreg import api
from modelreg.errors import ErrorCode, ModelregError
from modelreg.server.dashboard import error_page
from modelreg.server.http import _PARAMETER_NAMES, API, error_json, http_status

log = logging.getLogger("modelreg.server")


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


def _is_page(request: Request) -> bool:
    return not request.url.path.startswith(API) and request.url.path != "/metrics"


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ModelregError)
    async def modelreg_error(request: Request, exc: ModelregError) -> Response:
        status = http_status(exc)
        if status == 401 and _is_page(request):
            return RedirectResponse(f"/login?next={quote(request.url.path)}", status_code=303)
        if _is_page(request):
            return error_page(status, *exc.worded(_PARAMETER_NAMES), exc.step)
        return error_json(status, exc.code.value, *exc.worded(_PARAMETER_NAMES), exc.step)

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
                return error_json(503, found.code.value, found.message, found.hint, found.step)
        log.exception("internal error on %s %s", request.method, request.url.path)
        message = f"internal error ({type(exc).__name__}); the server log has the details"
        if _is_page(request):
            return error_page(500, message, None)
        return error_json(500, ErrorCode.INTERNAL.value, message, None)
