"""Progress of a verify run while it runs: typed events for whoever watches.

``Registry.verify(..., progress=callback)`` calls ``callback(event)`` as each check starts and
ends, when the runtime child is asked and answers, and per suite case where a case is
observable outside the runtime (the llama.cpp and transformers children answer every case at
once: their cases are reported as that answer is judged; an endpoint's as each HTTP answer
arrives). Events come from more than one thread (re-hashing runs beside the runtime), one at
a time. None (the default) is silent. The callback only watches: what it does (or raises)
changes no result.

``terminal_line`` and ``json_line`` render an event; the CLI writes them to stderr, never to
stdout (``verify --progress``).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from modelreg.schemas.verification import CheckResult


class ProgressMode(StrEnum):
    """How ``verify --progress`` shows progress: ``auto`` (a line per step on stderr when
    stderr is a terminal, else nothing), ``json`` (JSON lines on stderr), ``none``."""

    AUTO = "auto"
    JSON = "json"
    NONE = "none"


class ProgressKind(StrEnum):
    CHECK_STARTED = "check_started"
    CHECK_FINISHED = "check_finished"
    # The runtime child (llama.cpp) was sent its request: the model loads and every case runs.
    RUNTIME_STARTED = "runtime_started"
    RUNTIME_ANSWERED = "runtime_answered"
    CASE_ANSWERED = "case_answered"


@dataclass(frozen=True, slots=True)
class ProgressEvent:
    """One step of a verify run.

    ``check``: the check (or, for runtime events, the runtime: "llama.cpp"). ``at_s``: seconds
    since verify began; ``elapsed_s``: seconds since this check (or runtime request)
    started — 0 at its start. ``outcome`` / ``classification`` / ``summary``: a finished
    check's; a case's ``classification`` is its verdict when it is known (None: answered, not
    judged yet). ``case`` is 1-based, of ``cases``.
    """

    kind: ProgressKind
    check: str
    at_s: float
    elapsed_s: float = 0.0
    outcome: str | None = None
    classification: str | None = None
    summary: str | None = None
    case: int | None = None
    cases: int | None = None
    case_id: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The event as a JSON object: ``event``, ``check``, ``at_s``, ``elapsed_s``, and the
        other fields that are set."""
        fields: dict[str, Any] = {
            "event": self.kind.value,
            "check": self.check,
            "at_s": round(self.at_s, 3),
            "elapsed_s": round(self.elapsed_s, 3),
        }
        for name in ("outcome", "classification", "summary", "case", "cases", "case_id"):
            value = getattr(self, name)
            if value is not None:
                fields[name] = value
        return fields


ProgressCallback = Callable[[ProgressEvent], None]


class VerifyProgress:
    """What the checks call to report; timestamps events and hands them to the callback, one
    at a time. ``VerifyProgress(None)`` does nothing."""

    def __init__(self, callback: ProgressCallback | None = None) -> None:
        self.callback = callback
        self.began = time.perf_counter()
        self._started: dict[str, float] = {}
        self._cases_reported: set[str] = set()
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.callback is not None

    def _emit(self, kind: ProgressKind, check: str, *, start: bool = False, **fields: Any) -> None:
        if self.callback is None:
            return
        with self._lock:
            now = time.perf_counter()
            if start:
                self._started[check] = now
            since = self._started.get(check, now)
            event = ProgressEvent(kind, check, now - self.began, now - since, **fields)
            try:
                self.callback(event)
            except Exception:  # a broken display never decides a verify: stop showing
                self.callback = None

    def check_started(self, check: str) -> None:
        self._emit(ProgressKind.CHECK_STARTED, check, start=True)

    def check_finished(self, result: CheckResult) -> None:
        """``result``'s end; for a suite whose cases nobody reported while they ran, its cases
        with their verdicts first (``suite_result`` in the evidence)."""
        if self.callback is None:
            return
        suite = result.evidence.get("suite_result")
        cases = suite.get("cases") if isinstance(suite, dict) else None
        if isinstance(cases, list) and result.check not in self._cases_reported:
            for k, case in enumerate(cases, 1):
                if isinstance(case, dict):
                    self.case_answered(
                        result.check,
                        k,
                        len(cases),
                        str(case.get("case_id")),
                        classification=case.get("classification"),
                    )
        self._emit(
            ProgressKind.CHECK_FINISHED,
            result.check,
            outcome=result.outcome.value,
            classification=result.classification,
            summary=result.summary,
        )

    def runtime_started(self, runtime: str, cases: int) -> None:
        self._emit(ProgressKind.RUNTIME_STARTED, runtime, start=True, cases=cases)

    def runtime_answered(self, runtime: str, status: str) -> None:
        self._emit(ProgressKind.RUNTIME_ANSWERED, runtime, outcome=status)

    def case_answered(
        self,
        check: str,
        case: int,
        cases: int,
        case_id: str,
        *,
        classification: str | None = None,
    ) -> None:
        """Case ``case`` of ``cases`` of ``check`` answered (and judged, if
        ``classification`` is given)."""
        self._cases_reported.add(check)
        self._emit(
            ProgressKind.CASE_ANSWERED,
            check,
            case=case,
            cases=cases,
            case_id=case_id,
            classification=classification,
        )


def _seconds(value: float) -> str:
    return f"{value:.2f} s" if value < 10 else f"{value:.1f} s"


def terminal_line(event: ProgressEvent) -> str:
    """One line for a person at a terminal, e.g. ``[  0.41 s] gguf-cpu-smoke: pass in 0.32 s``
    or ``[  2.10 s] endpoint-smoke: case 3/15 facts-1 answered``."""
    head = f"[{event.at_s:7.2f} s] {event.check}:"
    kind = event.kind
    if kind is ProgressKind.CHECK_STARTED:
        return f"{head} started"
    if kind is ProgressKind.CHECK_FINISHED:
        cls = f" ({event.classification})" if event.classification else ""
        return f"{head} {event.outcome}{cls} in {_seconds(event.elapsed_s)}"
    if kind is ProgressKind.RUNTIME_STARTED:
        return f"{head} loading the model, then {event.cases} case(s)"
    if kind is ProgressKind.RUNTIME_ANSWERED:
        return f"{head} answered ({event.outcome}) after {_seconds(event.elapsed_s)}"
    verdict = event.classification or "answered"
    return f"{head} case {event.case}/{event.cases} {event.case_id}: {verdict}"


def json_line(event: ProgressEvent) -> str:
    """The event as one line of JSON (``verify --progress json``)."""
    return json.dumps(event.as_dict(), ensure_ascii=True)
