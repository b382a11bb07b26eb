"""The dashboard: server-rendered HTML (Jinja2, autoescaped) over the same Registry calls as
the JSON API — the what-runs-where matrix, a record page, a model's timeline and the rollback
page. No script at all; charts are inline SVG drawn from numbers computed in ``views``.

A browser reads with the login cookie (set from a token by the /login form; HttpOnly,
SameSite=Strict) or, with ``--public-read``, without one. The pages only read: every write
goes through the API with a bearer token, so a cookie can never cause a change.
"""

from __future__ import annotations

import json
import shlex
from functools import cache
from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import quote

from fastapi import FastAPI, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from modelreg.errors import ModelregError, NoRollbackCandidate
from modelreg.server import views
from modelreg.server.auth import COOKIE, authorize, bearer_secret
from modelreg.tokens import Permission

if TYPE_CHECKING:
    from jinja2 import Environment

    from modelreg.api import Registry
    from modelreg.server.app import ServerSettings


MATRIX_PAGE = 100  # models per page of the matrix


@cache
def environment() -> Environment:
    from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

    from modelreg.fingerprint import summary

    env = Environment(
        loader=PackageLoader("modelreg.server", "templates"),
        autoescape=select_autoescape(["html", "svg"], default=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        # Every value shown: controls, escape sequences and bidi overrides escaped (an uploaded
        # host or evidence string cannot reorder the page), then HTML-escaped by autoescape.
        finalize=_shown,
    )
    env.filters["gib"] = lambda n: "unknown" if n is None else f"{n / (1 << 30):.2f} GiB"
    env.filters["when"] = lambda t: "" if t is None else f"{t:%Y-%m-%d %H:%M:%S} UTC"
    env.filters["count"] = lambda c: "unknown" if c is None else f"{c:,}"
    env.filters["url"] = lambda s: quote(str(s), safe="")
    env.filters["shell"] = lambda s: shlex.quote(str(s))
    env.filters["runtime"] = summary  # a run's runtime in one line
    return env


def _shown(value: Any) -> Any:
    from markupsafe import Markup

    from modelreg.textsafe import for_terminal

    if isinstance(value, str) and not isinstance(value, Markup):
        return for_terminal(value)
    return value


def render(template: str, http_status: int = 200, **context: Any) -> HTMLResponse:
    html = environment().get_template(template).render(**context)
    return HTMLResponse(html, status_code=http_status)


def error_page(status: int, message: str, hint: str | None) -> HTMLResponse:
    return render("error.html", status, status=status, message=message, hint=hint)


def install_dashboard(app: FastAPI, registry: Registry, settings: ServerSettings) -> None:
    from modelreg.server.app import parse_form, static_file

    def reader(request: Request) -> str:
        """The caller's name, if it may read (a redirect to /login otherwise)."""
        secret = bearer_secret(request.headers.get("authorization")) or request.cookies.get(COOKIE)
        return authorize(registry, secret, Permission.READ, public_read=settings.public_read).name

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def matrix_page(
        request: Request,
        q: Annotated[str | None, Query(max_length=200)] = None,
        offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
    ) -> Response:
        who = reader(request)
        page = registry.matrix(contains=q or None, offset=offset, limit=MATRIX_PAGE)
        return render("matrix.html", who=who, matrix=views.matrix(page), q=q or "")

    @app.get("/records/{record_id}", response_class=HTMLResponse, include_in_schema=False)
    def record_page(request: Request, record_id: str) -> Response:
        from modelreg.server.app import record_ref

        who = reader(request)
        shown = registry.show(record_ref(record_id))
        manifest = shown.manifest
        quantization = manifest.get("quantization")
        fits: list[tuple[str, list[views.StackedBar] | None, str]] = []
        for target in _fit_targets(shown, manifest.get("format")):
            try:
                fit = registry.fit(shown.record.record_id, target)
            except ModelregError as exc:
                fits.append((target, None, exc.message))
                continue
            fits.append((target, views.fit_bars(fit), fit.verdict))
        return render(
            "record.html",
            who=who,
            shown=shown,
            record=shown.record,
            manifest=manifest,
            histogram=views.quantization_histogram(quantization),
            group_bits=views.group_bits(quantization),
            fits=fits,
            locations=registry.locations(shown.record.record_id).locations,
            counted={d.run_id for d in shown.deployability if d.run_id},
        )

    @app.get("/models/{model_id:path}", response_class=HTMLResponse, include_in_schema=False)
    def timeline_page(request: Request, model_id: str) -> Response:
        who = reader(request)
        history = registry.history(model_id)
        production = registry.status(model_id).entries
        return render("timeline.html", who=who, history=history, production=production)

    @app.get("/rollback", response_class=HTMLResponse, include_in_schema=False)
    def rollback_page(request: Request, model: str, target: str) -> Response:
        who = reader(request)
        try:
            plan = registry.rollback_plan(model, target)
        except NoRollbackCandidate as exc:
            return render(
                "rollback.html", who=who, model=model, target=target, plan=None, refusal=exc
            )
        body = json.dumps({"model": model, "target": target, "why": "…"}, ensure_ascii=False)
        return render(
            "rollback.html",
            who=who,
            model=model,
            target=target,
            plan=plan,
            refusal=None,
            curl_body=shlex.quote(body),
        )

    def login_form(request: Request, status: int, target: str, message: str | None) -> Response:
        """The sign-in form with a fresh CSRF token, also set as a SameSite=Strict cookie: a
        form posted from another site carries no cookie, so it cannot sign anyone in."""
        import secrets

        csrf = secrets.token_urlsafe(24)
        response = render("login.html", status, next=target, message=message, csrf=csrf)
        response.set_cookie(
            CSRF_COOKIE,
            csrf,
            httponly=True,
            samesite="strict",
            path="/login",
            secure=_https(request),
        )
        return response

    @app.get("/login", response_class=HTMLResponse, include_in_schema=False)
    def login_page(request: Request, next: str = "/") -> Response:
        return login_form(request, 200, _local_path(next), None)

    @app.post("/login", include_in_schema=False)
    async def login(request: Request) -> Response:
        import hmac

        form = parse_form(await request.body())
        secret = form.get("token", "").strip()
        target = _local_path(form.get("next", "/"))
        expected = request.cookies.get(CSRF_COOKIE, "")
        if not expected or not hmac.compare_digest(expected, form.get("csrf", "")):
            return login_form(
                request, 403, target, "the sign-in form expired or came from another site"
            )
        try:
            authorize(registry, secret or None, Permission.READ, public_read=False)
        except ModelregError as exc:
            return login_form(request, 401, target, exc.message)
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(
            COOKIE, secret, httponly=True, samesite="strict", path="/", secure=_https(request)
        )
        response.delete_cookie(CSRF_COOKIE, path="/login")
        return response

    @app.post("/logout", include_in_schema=False)
    def logout() -> Response:
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(COOKIE, path="/")
        return response

    @app.get("/favicon.ico", include_in_schema=False)
    def favicon() -> Response:
        return Response(status_code=204)

    @app.get("/static/style.css", include_in_schema=False)
    def stylesheet() -> Response:
        return Response(
            static_file("style.css"),
            media_type="text/css",
            headers={"Cache-Control": "max-age=300"},
        )


CSRF_COOKIE = "modelreg_csrf"


def _https(request: Request) -> bool:
    """Was the request made over HTTPS — directly, or through a proxy uvicorn trusts
    (``FORWARDED_ALLOW_IPS``; it then takes the scheme from ``X-Forwarded-Proto``)? Cookies are
    ``Secure`` then."""
    return request.url.scheme == "https"


def _local_path(value: str) -> str:
    """Only a path on this server may be a redirect target (no open redirect)."""
    if not value.startswith("/") or value.startswith("//") or "\\" in value:
        return "/"
    return value


def _fit_targets(shown: Any, artifact_format: str | None) -> list[str]:
    """Where to draw the memory fit: the targets the record was verified on or is
    production on, else the default target for its kind."""
    names = [d.target for d in shown.deployability] + [p.target for p in shown.production]
    found = list(dict.fromkeys(names))
    if not found:
        found = ["inf2.xlarge" if artifact_format == "neuron" else "cpu"]
    return found[:4]
