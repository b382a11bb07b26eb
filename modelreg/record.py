"""A recorded artifact as every layer sees it — the API, the validators, the rules' callers —
with no persistence attached (the store makes one from its row: ``store.record_of``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from pathlib import Path

from pydantic import ValidationError

from modelreg.schemas.manifest import Manifest


@dataclass(frozen=True)
class Record:
    """One recorded artifact. The manifest is parsed on first use: listing and deciding over
    many records needs only the columns."""

    id: str
    model_id: str
    format: str
    source: str | None
    license: str | None
    root: Path
    created_at: datetime
    created_by: str
    hold_reasons: tuple[str, ...]
    # None when the record was read without its manifest (status over many records); then
    # ``load_manifest_json`` fetches it on first use.
    manifest_json: str | None = field(repr=False)
    load_manifest_json: Callable[[], str] | None = field(default=None, repr=False, compare=False)
    # The model's own number for it (``acme/chat@v3``); None only before it is stored.
    version: int | None = field(default=None, compare=False)

    @property
    def handle(self) -> str | None:
        """``MODEL@vN``: what a person types for it."""
        return f"{self.model_id}@v{self.version}" if self.version is not None else None

    @cached_property
    def manifest(self) -> Manifest:
        text = self.manifest_json
        if text is None:
            assert self.load_manifest_json is not None
            text = self.load_manifest_json()
        # The registry's own row: bounds added since it was stored do not refuse it
        # (limits.bounded); every door that stores one checks them.
        try:
            return Manifest.model_validate_json(text, context={"stored": True})
        except ValidationError:
            # A row stored before the storage boundary (or around it) holding what it now
            # refuses: read it made readable, so one bad row never breaks list or show.
            from modelreg.storable import loads_readable

            return Manifest.model_validate(loads_readable(text), context={"stored": True})
