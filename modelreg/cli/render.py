"""Output helpers: data to stdout (JSON or an aligned table), messages to stderr.

Every string shown on a terminal goes through ``clean``: text from artifacts, cards, target
files, file names and flags cannot move the cursor, recolour the screen or break a record
over two lines. Messages (``say``) and errors (``modelreg.cli.main``) also go through
``modelreg.secrets.redact_secrets``: no key, token or password in them reaches a CI log.
Data (``out``, ``emit``) does not — ``token create`` prints its new secret there, once.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # `modelreg --help` imports this module: no pydantic for it
    from pydantic import BaseModel

    from modelreg.schemas.output import Output, StepOut


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


# Only a column wider than this is cut to fit the terminal, and to no less than this: times,
# ids and states stay whole; free text (a summary, a reason) is what gives way.
_COLUMN_MIN = 24


def terminal_width() -> int | None:
    """The width a person reads stdout at: ``COLUMNS`` when set, else the terminal's when
    stdout is one; None for a pipe or a file (a script gets every character)."""
    given = os.environ.get("COLUMNS", "")
    if given.isdigit() and int(given) > 0:
        return int(given)
    if sys.stdout.isatty():
        return shutil.get_terminal_size().columns
    return None


def table(
    rows: Sequence[Sequence[Any]], headers: Sequence[str], *, width: int | None = None
) -> str:
    """Columns padded to their widest cell. Read at a terminal (``terminal_width``, or
    ``width``), the widest columns — a summary, a reason — are cut with "…", widest first,
    until each line fits or every column wider than ``_COLUMN_MIN`` characters is down to
    it; ``--json`` has every value whole."""
    cells = [[("" if c is None else clean(c)) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    limit = width if width is not None else terminal_width()
    if limit is not None and widths:
        floor = [max(len(h), min(w, _COLUMN_MIN)) for h, w in zip(headers, widths, strict=True)]
        over = sum(widths) + 2 * (len(widths) - 1) - limit
        while over > 0:
            room = [w - f for w, f in zip(widths, floor, strict=True)]
            widest = max(range(len(widths)), key=lambda i: (room[i], i))
            if room[widest] <= 0:
                break
            cut = min(over, room[widest], max(1, widths[widest] // 4))
            widths[widest] -= cut
            over -= cut
        for row in cells:
            for i, w in enumerate(widths):
                if len(row[i]) > w:
                    row[i] = row[i][: w - 1] + "…"
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


class FetchProgress:
    """``fetch --progress``: a bar on stderr when it is a terminal (auto), JSON lines on
    stderr (json: ``start``, ``progress`` at most every half second, ``done``), or nothing.
    stdout stays the command's output."""

    def __init__(self, mode: str) -> None:
        self.mode = mode if mode != "auto" else ("bar" if sys.stderr.isatty() else "none")
        self.total = 0
        self.done = 0
        self._lock = threading.Lock()
        self._began = time.perf_counter()
        self._shown_at = 0.0
        self._started = False

    @property
    def enabled(self) -> bool:
        return self.mode in ("bar", "json")

    def _json(self, event: str, **fields: object) -> None:
        at = round(time.perf_counter() - self._began, 3)
        sys.stderr.write(json.dumps({"event": event, **fields, "at_s": at}) + "\n")
        sys.stderr.flush()

    def start(self, record_id: str, files: int, total: int) -> None:
        self.total, self._began, self._started = total, time.perf_counter(), True
        if self.mode == "json":
            self._json("start", record_id=record_id, files=files, bytes=total)

    def __call__(self, n: int) -> None:
        with self._lock:
            self.done += n
            now = time.perf_counter()
            if now - self._shown_at < 0.5 and self.done < self.total:
                return
            self._shown_at = now
            if self.mode == "json":
                self._json("progress", bytes=self.done, total=self.total)
            elif self.mode == "bar":
                percent = self.done * 100 // max(self.total, 1)
                rate = self.done / max(now - self._began, 1e-9)
                bar = "#" * (percent // 4)
                sys.stderr.write(
                    f"\rfetching [{bar:<25}] {percent:3d}% {human_bytes(self.done)} of "
                    f"{human_bytes(self.total)}, {human_bytes(int(rate))}/s   "
                )
                sys.stderr.flush()

    def finish(self, ok: bool) -> None:
        if not self._started:
            return  # refused before any byte was asked for: the error says why
        if self.mode == "json":
            self._json("done" if ok else "failed", bytes=self.done)
        elif self.mode == "bar":
            sys.stderr.write("\n")
            sys.stderr.flush()


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


def command_of(step: StepOut | None) -> str | None:
    """A next step (an output's data) as the command that does it, after its purpose."""
    from modelreg.cli.steps import said

    return said(step.step()) if step is not None else None


def say_next(output: Output) -> None:
    """Each of an output's next steps, as a command, one line each (stderr)."""
    for step in output.next_steps:
        say(f"next: {command_of(step)}")
