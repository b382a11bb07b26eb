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
dashboard is server-rendered HTML with inline SVG and one packaged stylesheet, no script."""

# No ``from __future__ import annotations``: FastAPI reads annotations at run time.

import json
import logging
import os
import threading
from collections.abc import Callable

from fastapi import FastAPI

from modelreg import api
from modelreg.process import tune_collector
from modelreg.server.auth import COOKIE, authorize, bearer_secret
from modelreg.server.guard import ASGIApp, Guard, Scope, _permission_of
from modelreg.server.handlers import install_error_handlers
from modelreg.server.http import API, ServerSettings, _cookie
from modelreg.server.routes import router
from modelreg.server.supervise import server_config

__all__ = ["create_app", "run", "server_config", "start_deliverer"]

log = logging.getLogger("modelreg.server")
SETTINGS_VARIABLE = "MODELREG_SERVE_SETTINGS"


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
    install_error_handlers(app)
    app.include_router(router)
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
    (each opens the registry; the parent checks it first, so errors show before serving, then
    becomes the supervisor: ``modelreg.server.supervise``)."""
    import uvicorn

    if workers == 1:
        registry = api.open(settings.url)
        config = server_config(create_app(settings, registry), host, port, access_log=access_log)
        if settings.webhooks:
            start_deliverer(registry)
    else:
        api.open(settings.url).close()  # fail here, not in workers
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
    _become_supervisor(host, port, workers, access_log)


def _become_supervisor(host: str, port: int, workers: int, access_log: bool) -> None:
    """Replace this process (same pid, same environment: the workers' settings) with the
    supervisor, which imports none of what the registry's check loaded here."""
    import sys

    import modelreg

    # Wherever this process found modelreg, the supervisor and its workers find it too.
    source = os.path.dirname(os.path.dirname(os.path.abspath(modelreg.__file__)))
    path = os.environ.get("PYTHONPATH")
    env = dict(os.environ, PYTHONPATH=source + (os.pathsep + path if path else ""))
    sys.stdout.flush()
    sys.stderr.flush()
    argv = [str(host), str(port), str(workers), "1" if access_log else "0"]
    os.execve(sys.executable, [sys.executable, "-m", "modelreg.server.supervise", *argv], env)
