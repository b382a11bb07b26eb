"""Fresh virtualenvs holding modelreg with some extras and nothing else: the hosts of a fleet
(a team service with ``[server]``, an init container with ``[s3]``), for tests that compare
what they answer with what this one does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def pip_env(home: Path) -> dict[str, str]:
    """The environment of a fresh venv's commands: its own HOME and MODELREG_HOME, the
    machine's pip cache, nothing else of this process (no PYTHONPATH, no MODELREG_*)."""
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(home),
        "MODELREG_HOME": str(home / "modelreg"),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "MODELREG_ACTOR": "tester",
    }
    env["PIP_CACHE_DIR"] = os.environ.get("PIP_CACHE_DIR") or str(Path.home() / ".cache" / "pip")
    return env


def fresh_venv(where: Path, extras: str) -> Path:
    """A new venv at ``where`` with ``modelreg[extras]`` installed from this checkout (its
    dependencies from PyPI, as on a host of the fleet); returns its ``bin`` directory."""
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", str(where)], check=True)
    subprocess.run(
        [str(where / "bin" / "pip"), "install", "-q", f"{REPO}[{extras}]"],
        check=True,
        env=pip_env(where.parent),
        timeout=900,
    )
    return where / "bin"


def present(bin_dir: Path, modules: tuple[str, ...]) -> list[str]:
    """Which of ``modules`` the venv can import."""
    done = subprocess.run(
        [
            str(bin_dir / "python"),
            "-c",
            f"import importlib.util as u; print([m for m in {modules!r} if u.find_spec(m)])",
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    import ast

    return list(ast.literal_eval(done.stdout.strip()))
