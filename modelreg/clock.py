"""Now, in UTC: what every timestamp modelreg writes is taken from."""

from __future__ import annotations

from datetime import UTC, datetime


def utcnow() -> datetime:
    return datetime.now(UTC)
