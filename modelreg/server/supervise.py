"""The parent of ``modelreg serve --workers N``: uvicorn's supervisor, in a process that imports
uvicorn and nothing of the registry, the application or the framework.

``server.app.run`` checks the registry in the command's own process (its errors shown before
anything listens) and then replaces that process with this module (same pid: a signal sent to
the command reaches the supervisor). The workers each open the registry and build the app
themselves; a parent that kept what the check imported (SQLAlchemy, the driver, the API, FastAPI
and the routes) would hold ~70 MB it never uses, a fifth of the process tree under load.

    python -m modelreg.server.supervise HOST PORT WORKERS ACCESS_LOG(0|1)

The workers' settings come from the environment ``run`` set (``MODELREG_SERVE_SETTINGS``).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

PROTOCOL = "modelreg.server.protocol:NoDelayH11Protocol"
APP_FACTORY = "modelreg.server.app:app_from_environment"


def server_config(
    app: Any, host: str, port: int, *, access_log: bool = False, workers: int = 1
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


def supervise(host: str, port: int, workers: int, access_log: bool) -> None:
    """Bind the socket and run ``workers`` processes of the app on it until interrupted."""
    from uvicorn.supervisors import Multiprocess

    config = server_config(APP_FACTORY, host, port, access_log=access_log, workers=workers)
    Multiprocess(config, sockets=[config.bind_socket()]).run()


def main(argv: Sequence[str] | None = None) -> None:
    host, port, workers, access_log = argv if argv is not None else sys.argv[1:]
    supervise(host, int(port), int(workers), access_log == "1")


if __name__ == "__main__":
    main()
