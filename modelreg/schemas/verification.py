"""The outcome of one validator run, as stored and as printed with ``--json``."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field


class Outcome(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    # The check could not run here (no runtime, no hardware, wrong host). Never a pass.
    UNAVAILABLE = "unavailable"
    # The check does not apply to this record on this target (e.g. embed-scale for a bundle
    # that embeds inside the model). It does not block deployment; "could not run" is
    # UNAVAILABLE, which does.
    SKIPPED = "skipped"


class CheckResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    check: str = Field(max_length=64)
    required: bool
    outcome: Outcome
    # e.g. wrong_answer, degenerate, crashed, timeout
    classification: str | None = Field(default=None, max_length=32)
    summary: str
    evidence: dict[str, Any] = Field(default_factory=dict)
    # With their UTC offset: a time without one is not a point in time (refused at the door).
    started_at: AwareDatetime
    finished_at: AwareDatetime


def generations(evidence: dict[str, Any]) -> list[dict[str, Any]]:
    """The prompts and answers in a check's evidence; none when it holds no well-formed list
    (evidence imported from a file is shown, never trusted to be well formed)."""
    found = evidence.get("generations")
    return [g for g in found if isinstance(g, dict)] if isinstance(found, list) else []
