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
from dataclasses import dataclass
from functools import cache
from itertools import pairwise
from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import quote

from fastapi import FastAPI, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from modelreg.errors import ModelregError
from modelreg.server import views
from modelreg.server.auth import COOKIE, authorize, bearer_secret
from modelreg.steps import Step
from modelreg.tokens import Permission

if TYPE_CHECKING:
    from jinja2 import Environment

    from modelreg.api import Registry
    from modelreg.server.http import ServerSettings


MATRIX_PAGE = 100  # models per page of the matrix
RECORDS_PAGE = 100  # records per page of /records
VERSIONS_PAGE = 1000  # a model page's versions


@cache
def environment() -> Environment:
    from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

    from modelreg.fingerprint import summary
    from modelreg.units import number

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
    env.filters["figure"] = lambda v: "unknown" if v is None else number(float(v))
    env.filters["compact"] = _compact
    env.filters["step"] = lambda s: shown_step(s if s is None or isinstance(s, Step) else s.step())
    return env


def _compact(value: Any, limit: int = 600) -> str:
    """A diff section's value on one line: JSON, keys sorted, cut at ``limit`` characters."""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _shown(value: Any) -> Any:
    from markupsafe import Markup

    from modelreg.textsafe import for_terminal

    if isinstance(value, str) and not isinstance(value, Markup):
        return for_terminal(value)
    return value


def render(template: str, http_status: int = 200, **context: Any) -> HTMLResponse:
    html = environment().get_template(template).render(**context)
    return HTMLResponse(html, status_code=http_status)


def error_page(
    status: int, message: str, hint: str | None, step: Step | None = None
) -> HTMLResponse:
    return render(
        "error.html", status, status=status, message=message, hint=hint, step=shown_step(step)
    )


def shown_step(step: Step | None) -> str | None:
    """A next step as a person reads it on a page: what it is for, the action, its arguments."""
    if step is None:
        return None
    args = ", ".join(f"{k} {'…' if v is None else v}" for k, v in step.args.items())
    what = f"{step.action.replace('_', ' ')}" + (f" ({args})" if args else "")
    return step.said(what)


def install_dashboard(app: FastAPI, registry: Registry, settings: ServerSettings) -> None:
    from modelreg.server.http import parse_form, static_file

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
        from modelreg.server.http import record_ref

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
            trends=views.trend_charts(registry.trend(record=shown.record.record_id)),
            lineage=_lineage(
                registry,
                (manifest.get("base_model"), manifest.get("base_model_revision")),
                shown.record.record_id,
            ),
            previous=_previous(registry, shown.record),
        )

    @app.get("/models/{model_id:path}", response_class=HTMLResponse, include_in_schema=False)
    def model_page(
        request: Request,
        model_id: str,
        sort: Annotated[str, Query(max_length=20)] = "added",
        order: Annotated[str, Query(max_length=4)] = "desc",
    ) -> Response:
        """A model: every version with its state, verdict per target and production marker
        (sortable), its runs over time, who did what, and its base model."""
        who = reader(request)
        history = registry.history(model_id)
        production = registry.status(model_id).entries
        key = sort if sort in views.SORT_KEYS else "added"
        descending = order != "asc"
        page = registry.browse(model=model_id, limit=VERSIONS_PAGE)
        versions = views.sorted_records(page.records, key, descending)
        newest_first = sorted(page.records, key=lambda i: i.record.created_at, reverse=True)
        compare = [
            (older.record.record_id, newer.record.record_id)
            for newer, older in pairwise(newest_first)
        ][:5]
        base = f"/models/{model_id}"
        links = {
            k: (
                f"{base}?sort={k}&order={'asc' if k == key and descending else 'desc'}",
                (" ↓" if descending else " ↑") if k == key else "",
            )
            for k in views.SORT_KEYS
        }
        return render(
            "timeline.html",
            who=who,
            history=history,
            production=production,
            versions=versions,
            sort=key,
            sort_links=links,
            compare=compare,
            trends=views.trend_charts(registry.trend(model=model_id)),
            lineage=_lineage(registry, _base_model(registry, newest_first), ""),
        )

    @app.get("/records", response_class=HTMLResponse, include_in_schema=False)
    def records_page(
        request: Request,
        model: Annotated[str | None, Query(max_length=200)] = None,
        state: Annotated[str | None, Query(max_length=20)] = None,
        format: Annotated[str | None, Query(max_length=20)] = None,
        target: Annotated[str | None, Query(max_length=200)] = None,
        now: Annotated[str | None, Query(max_length=20)] = None,
        offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
    ) -> Response:
        """Every record, newest first, filtered by model, state, format and verdict on a
        target; a filter that is not valid is said on the page."""
        from modelreg.api.browse import FORMATS, VERDICTS

        who = reader(request)
        filters = {
            "model": model or None,
            "state": state or None,
            "format": format or None,
            "target": target or None,
            "now": now or None,
        }
        context: dict[str, Any] = {
            "who": who,
            "filters": filters,
            "models": registry.models(),
            "formats": FORMATS,
            "verdicts": VERDICTS,
            "targets": [t.name for t in registry.targets().targets],
            "refusal": None,
            "page": None,
            "previous_link": None,
            "next_link": None,
        }
        try:
            page = registry.browse(**filters, offset=offset, limit=RECORDS_PAGE)
        except ModelregError as exc:
            context["refusal"] = exc
            return render("records.html", 400, **context)
        query = "&".join(f"{k}={quote(v, safe='')}" for k, v in filters.items() if v)
        if offset > 0:
            context["previous_link"] = f"/records?{query}&offset={max(0, offset - RECORDS_PAGE)}"
        if offset + RECORDS_PAGE < page.total:
            context["next_link"] = f"/records?{query}&offset={offset + RECORDS_PAGE}"
        context["page"] = page
        return render("records.html", **context)

    @app.get("/search", response_class=HTMLResponse, include_in_schema=False)
    def search_page(request: Request, q: Annotated[str, Query(max_length=200)] = "") -> Response:
        """A record id prefix or a file's sha256: straight to the record when one matches."""
        who = reader(request)
        try:
            found = registry.search(q)
        except ModelregError as exc:
            return render("search.html", 400, who=who, query=q, found=None, refusal=exc)
        if len(found.matches) == 1:
            return RedirectResponse(
                f"/records/{quote(found.matches[0].record.record_id, safe='')}", status_code=303
            )
        return render("search.html", who=who, query=q, found=found, refusal=None)

    @app.get("/diff", response_class=HTMLResponse, include_in_schema=False)
    def diff_page(
        request: Request,
        a: Annotated[str, Query(max_length=200)] = "",
        b: Annotated[str, Query(max_length=200)] = "",
    ) -> Response:
        """What changed from record A to record B — ``modelreg diff`` as a page."""
        from modelreg.server.http import record_or_handle

        who = reader(request)
        try:
            found = registry.diff(
                record_or_handle(registry, a.strip()), record_or_handle(registry, b.strip())
            )
        except ModelregError as exc:
            return render("diff.html", 400, who=who, a=a, b=b, diff=None, refusal=exc)
        return render("diff.html", who=who, a=a, b=b, diff=found, refusal=None)

    @app.get("/rollback", response_class=HTMLResponse, include_in_schema=False)
    def rollback_page(request: Request, model: str, target: str) -> Response:
        who = reader(request)
        plan = registry.rollback_plan(model, target)
        if plan.decision == "no_candidate":
            return render(
                "rollback.html", who=who, model=model, target=target, plan=None, refusal=plan
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


@dataclass(frozen=True)
class Lineage:
    model: str
    revision: str | None
    registered: bool
    newest: str | None  # the base's own record at the pinned revision; None: none recorded


def _lineage(registry: Registry, base: tuple[str | None, str | None], own: str) -> Lineage | None:
    """The base model, linked when this registry has records of it, and the record of the base
    itself at the pinned revision when one is recorded: its source names that commit (or one
    of its files has that sha256) and it is not itself derived from another model — never
    another quantization of the same id, never a guess at another revision (never ``own``)."""
    model, revision = base
    if not model:
        return None
    if model not in registry.models():
        return Lineage(model, revision, False, None)
    if not revision:
        return Lineage(model, revision, True, None)
    digest = revision.removeprefix("sha256:")
    # Newest first, not judged: a link needs no verdict.
    for item in reversed(registry.records(model).records):
        r = item.record
        at_revision = revision in (r.source or "") or any(f.sha256 == digest for f in r.files)
        if r.record_id == own or not at_revision:
            continue
        if registry.get(r.record_id).manifest.base_model is None:
            return Lineage(model, revision, True, r.record_id)
    return Lineage(model, revision, True, None)


def _base_model(registry: Registry, newest_first: list[Any]) -> tuple[str | None, str | None]:
    """The base model (and its revision) the model's newest record names."""
    if not newest_first:
        return None, None
    manifest = registry.get(newest_first[0].record.record_id).manifest
    return manifest.base_model, manifest.base_model_revision


def _previous(registry: Registry, record: Any) -> str | None:
    """The model's record added just before this one (its previous version)."""
    ids = [item.record.record_id for item in registry.records(record.model_id).records]
    at = ids.index(record.record_id) if record.record_id in ids else 0
    return ids[at - 1] if at > 0 else None
