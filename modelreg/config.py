"""Where modelreg keeps its files, read from the environment in one place."""

from __future__ import annotations

import getpass
import os
import socket
from pathlib import Path


def home() -> Path:
    """``$MODELREG_HOME``, else ``$XDG_DATA_HOME/modelreg``, else ``~/.local/share/modelreg``."""
    explicit = os.environ.get("MODELREG_HOME")
    if explicit:
        path = Path(explicit).expanduser()
        if path.exists() and not path.is_dir():
            from modelreg.errors import InvalidInput

            raise InvalidInput(
                f"MODELREG_HOME {explicit!r} is a file, not a directory",
                "point it at a directory (it is created when missing)",
            )
        return path
    xdg = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(xdg).expanduser() / "modelreg"


def database_url(explicit: str | None = None) -> str:
    """``--db``, else ``$MODELREG_DATABASE_URL``, else the SQLite file under ``home()``."""
    url = explicit or os.environ.get("MODELREG_DATABASE_URL")
    if url:
        return url
    return f"sqlite:///{home() / 'registry.db'}"


def targets_file() -> Path:
    """User-defined targets: ``$MODELREG_TARGETS``, else ``home()/targets.yaml``."""
    explicit = os.environ.get("MODELREG_TARGETS")
    return Path(explicit).expanduser() if explicit else home() / "targets.yaml"


def actor() -> str:
    """Who is acting, for the event log: ``$MODELREG_ACTOR``, else ``user@host``."""
    explicit = os.environ.get("MODELREG_ACTOR")
    if explicit:
        from modelreg.limits import ACTOR_MAX, check_length

        return check_length("MODELREG_ACTOR", explicit, ACTOR_MAX)
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()}"


def debug() -> bool:
    return os.environ.get("MODELREG_DEBUG", "") not in ("", "0")
