"""Figures in plain units, the same wherever a run's resources are printed: ``20.5 s``, not
``2.054e+04 ms``; ``0.46 tok/s``, not ``0 tok/s``."""

from __future__ import annotations

import math

GiB = 1 << 30


def number(value: float, digits: int = 3) -> str:
    """A figure with about ``digits`` significant digits and never an exponent: ``120``,
    ``16.3``, ``1.63``, ``0.46``, ``0.0031``."""
    if not math.isfinite(value):
        return str(value)
    magnitude = abs(value)
    if magnitude == 0:
        return "0"
    if magnitude >= 10 ** (digits - 1):
        return f"{value:,.0f}"
    # One significant digit fewer below 1 (0.46, 0.0031), ``digits`` from 1 up (1.63, 16.3).
    significant = digits - 1 if magnitude < 1 else digits
    decimals = max(0, significant - 1 - math.floor(math.log10(magnitude)))
    text = f"{value:.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def duration_ms(ms: float, digits: int = 3) -> str:
    """A duration given in milliseconds: ``85 ms``, ``20.5 s``, ``3 min 39 s``."""
    if not math.isfinite(ms):
        return f"{ms} ms"
    if abs(ms) < 999.5:  # what rounds to 1000 ms is 1 s
        return f"{number(ms, digits)} ms"
    seconds = ms / 1000
    if abs(seconds) < 59.95 or digits > 3:
        return f"{number(seconds, digits)} s"
    minutes, rest = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {rest} s" if rest else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


def rate(per_second: float, unit: str = "tok/s", digits: int = 3) -> str:
    """A rate: ``1.63 tok/s``, ``0.46 tok/s``, ``120 tok/s``."""
    return f"{number(per_second, digits)} {unit}"


def gib(value_gib: float, digits: int = 3) -> str:
    """A size given in GiB: ``0.46 GiB``, ``12.5 GiB``."""
    return f"{number(value_gib, digits)} GiB"


def size_bytes(value: int) -> str:
    """A size given in bytes, in GiB."""
    return gib(value / GiB)
