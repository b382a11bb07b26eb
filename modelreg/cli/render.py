"""Output helpers: data to stdout (JSON or an aligned table), messages to stderr.

Every string shown on a terminal goes through ``clean``: text from artifacts, cards, target
files, file names and flags cannot move the cursor, recolour the screen or break a record
over two lines. Messages (``say``) and errors (``modelreg.cli.main``) also go through
``modelreg.secrets.redact_secrets``: no key, token or password in them reaches a CI log.
Data (``out``, ``emit``) does not — ``token create`` prints its new secret there, once.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # `modelreg --help` imports this module: no pydantic for it
    from pydantic import BaseModel


def clean(text: Any) -> str:
    """``text`` safe for a terminal line: control characters and escape sequences escaped."""
    from modelreg.textsafe import for_terminal

    return for_terminal(str(text))


def emit(output: BaseModel) -> None:
    """An output model as JSON on stdout (the ``--json`` contract); bidi overrides, C1 and
    format characters as \\u escapes (``textsafe.for_json``: the same JSON, harmless raw)."""
    from modelreg.textsafe import for_json

    sys.stdout.write(for_json(output.model_dump_json(indent=2)) + "\n")


def out(text: str = "") -> None:
    """A line of data on stdout, cleaned."""
    sys.stdout.write(clean(text) + "\n")


def say(message: str) -> None:
    """A message for the person at the terminal (stderr, so stdout stays data), cleaned and
    with every secret hidden (``modelreg.secrets``)."""
    from modelreg.secrets import redact_secrets

    sys.stderr.write(clean(redact_secrets(message)) + "\n")


def table(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> str:
    cells = [[("" if c is None else clean(c)) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    ]
    return "\n".join(lines)


def human_bytes(n: int | None) -> str:
    if n is None:
        return "unknown"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.1f} {unit}" if unit != "B" else f"{n} B"
        value /= 1024
    raise AssertionError("unreachable")


class HashProgress:
    """A one-line progress display on stderr, only when stderr is a terminal."""

    def __init__(self) -> None:
        self.enabled = sys.stderr.isatty()
        self.total = 0
        self.done = 0
        self._lock = threading.Lock()
        self._shown = -1

    def start(self, total: int) -> None:
        self.total = total

    def __call__(self, n: int) -> None:
        if not self.enabled or self.total < (64 << 20):
            return
        with self._lock:
            self.done += n
            percent = self.done * 100 // max(self.total, 1)
            if percent != self._shown:
                self._shown = percent
                sys.stderr.write(f"\rhashing {human_bytes(self.total)}: {percent:3d}%")
                if self.done >= self.total:
                    sys.stderr.write("\n")
                sys.stderr.flush()
