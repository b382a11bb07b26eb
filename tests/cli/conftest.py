"""The CLI tests run against both registry backends."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _registry_backend(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MODELREG_DATABASE_URL", db_url)
