"""Outputs about records: inspect, add, show, list, search, browse, trends."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from modelreg.schemas.output.base import (
    DeployabilityOut,
    Output,
    PromotionOut,
    RecordOut,
    RunOut,
    _Out,
)


class InspectOutput(Output):
    record_id: str = Field(description="The id `add` would give this artifact.")
    manifest: dict[str, Any]


class AddOutput(Output):
    created: bool
    record: RecordOut
    manifest: dict[str, Any]
    locations: list[str] = Field(
        default_factory=list, description="Where the record's bytes can be fetched."
    )
    notes: list[str] = Field(
        default_factory=list,
        description="What an adder should know that holds nothing, e.g. the license changed "
        "since the model's previous record (modelreg.license_policy.license_change).",
    )


class ShowOutput(Output):
    record: RecordOut
    manifest: dict[str, Any]
    production: list[PromotionOut] = Field(description="Where this record is production now.")
    approvals: list[PromotionOut] = Field(
        default_factory=list,
        description="Where it was promoted before and is not production now: the newest "
        "promotion there, with the approval it was made with (owner, known limitations, "
        "re-test date).",
    )
    deployability: list[DeployabilityOut]
    runs: list[RunOut]
    units: dict[str, dict[str, str]] = Field(
        default_factory=dict,
        description="Per target it is production on or was verified on: the target's deployed "
        "unit (image, launch command, flags, endpoint), when it declares one.",
    )


class ListItem(_Out):
    record: RecordOut
    total_parameters: int | None
    bits_per_weight: float | None
    deployability: DeployabilityOut | None = None


class ListOutput(Output):
    target: str | None = None
    records: list[ListItem]


class SearchMatch(_Out):
    record: RecordOut
    matched: Literal["record_id", "sha256", "model_id"] = Field(
        description="record_id: the query is a prefix of the record's id; sha256: of one of "
        "its files' sha256 (that file is named); model_id: a part of its model's id."
    )
    file: str | None = None


class SearchOutput(Output):
    query: str
    matches: list[SearchMatch] = Field(description="Newest records first.")
    truncated: bool = Field(description="More records matched than the limit.")


class BrowseItem(_Out):
    record: RecordOut
    total_parameters: int | None
    bits_per_weight: float | None
    production_on: list[str] = Field(description="Targets this record is production on now.")
    deployability: list[DeployabilityOut] = Field(
        description="Its verdict now on every target it has runs on (and on the filtered "
        "target, verified or not)."
    )


class BrowseOutput(Output):
    records: list[BrowseItem] = Field(description="Newest first.")
    total: int = Field(description="Records matching the filters (this page holds some).")
    offset: int
    limit: int


class TrendPoint(_Out):
    record_id: str
    run_id: str
    target: str
    at: datetime = Field(description="When the run's last check finished.")
    passed: bool
    decode_tokens_per_s: float | None = None
    ttft_ms: float | None = Field(default=None, description="Median time to first token.")
    peak_rss_bytes: int | None = None


class TrendOutput(Output):
    model_id: str | None
    record_id: str | None
    points: list[TrendPoint] = Field(description="Local runs, oldest first.")
