"""Settings of the processes modelreg owns — the command line and ``modelreg serve`` — applied
by their entry points, never by ``import modelreg``: a library leaves its host's garbage
collector alone."""

from __future__ import annotations

import gc

# CPython collects the young generation every 700 net allocations. ``status`` over thousands
# of production entries builds tens of thousands of small objects that all live until the
# answer is written, and at 700 the collector scans them again and again: over 5,000 entries
# about a third of the time went to collections that found nothing to free.
YOUNG_THRESHOLD = 10_000


def tune_collector(*, freeze: bool = False) -> None:
    """Collect the young generation every ``YOUNG_THRESHOLD`` allocations (the older
    generations keep CPython's ratios). ``freeze``: move everything allocated so far — the
    imported modules, the application — out of the collector's sight, for a long-lived
    server whose full collections would otherwise traverse all of it every time."""
    _young, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
    if freeze:
        gc.freeze()
