"""The bodies the JSON API accepts: each a pydantic model that refuses unknown fields, its limits
stated (they are the OpenAPI document's)."""

# No ``from __future__ import annotations``: FastAPI reads annotations at run time.

import logging
from datetime import date
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from modelreg.schemas.verification import CheckResult

log = logging.getLogger("modelreg.server")


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PromoteInput(_In):
    target: str = Field(min_length=1, max_length=100)
    why: str | None = Field(default=None, max_length=10_000)
    owner: str | None = Field(default=None, max_length=1_000, description="Who answers for it.")
    limitations: list[str] = Field(
        default_factory=list, max_length=100, description="Its known limitations."
    )
    retest_by: date | None = Field(default=None, description="Re-test it by this day (UTC).")
    accept_relaxed_gate: bool = Field(
        default=False,
        description="Accept (with why) passes under a gate weakened after the record failed it.",
    )


class ReasonInput(_In):
    why: str = Field(min_length=1, max_length=10_000)


class WebhookInput(_In):
    url: str = Field(min_length=1, max_length=2000, description="http:// or https://")
    events: list[str] = Field(
        default=["promote", "rollback", "hold", "release", "retire", "verify"],
        min_length=1,
        max_length=20,
        description="Event kinds (modelreg.webhooks.EVENTS).",
    )
    secret: str | None = Field(
        default=None,
        min_length=16,
        max_length=200,
        description="Sign with this secret (else a new one, in the answer only).",
    )


class RollbackInput(_In):
    model: str = Field(min_length=1, max_length=200)
    target: str = Field(min_length=1, max_length=100)
    why: str = Field(min_length=1, max_length=10_000)
    to: str | None = Field(
        default=None, min_length=1, max_length=32, description="Roll back to this record."
    )


class AddManifestInput(_In):
    """The output of ``modelreg inspect --json`` (``record_id`` and ``manifest``), with the
    locations the artifact's bytes can be fetched from."""

    manifest: dict[str, Any]
    record_id: str | None = Field(default=None, max_length=64)
    schema_version: int | None = None
    next_steps: list[dict[str, Any]] = Field(
        default_factory=list, max_length=20, description="Ignored (what inspect suggested)."
    )
    locations: list[str] = Field(default_factory=list, max_length=100)


class LocationsInput(_In):
    urls: list[str] = Field(min_length=1, max_length=100)


class RunUpload(_In):
    """One verification run produced on a target host (the checks of ``verify --json``, the
    host and the runtime fingerprint). Stored as uploaded evidence; it counts only when the
    target trusts verifier keys and ``envelope`` — the run's DSSE-signed in-toto statement
    (``verify --sign-key``, shown by ``modelreg attest``) — verifies with one of them and
    covers exactly these checks, this fingerprint and the record's files."""

    target: str = Field(min_length=1, max_length=100)
    host: str = Field(min_length=1, max_length=200)
    fingerprint: dict[str, str] = Field(default_factory=dict, max_length=200)
    checks: list[CheckResult] = Field(min_length=1, max_length=100)
    envelope: dict[str, Any] | None = Field(default=None)
