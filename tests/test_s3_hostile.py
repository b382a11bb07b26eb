"""S3 locations against a hostile S3 API (``tests.hostile``): a range answered longer than
asked is refused at the byte that passes it ("longer than", never "short read"), and a
dripping store costs one deadline per request (in its headers or its body) — when a location
is fetched and when it is checked (``check_location``, what ``modelreg locations check``
records). The honest path is ``tests/test_s3.py`` (moto's server)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from modelreg import s3
from modelreg.errors import NotFetchable
from modelreg.locations import WantedFile, check_location, fetch_files
from tests.hostile.server import MIB, HostileServer, Pattern, s3_object

pytest.importorskip("boto3")

BUCKET = "models"


@pytest.fixture
def hostile(monkeypatch: pytest.MonkeyPatch) -> Iterator[HostileServer]:
    with HostileServer() as server:
        for name, value in {
            "AWS_ENDPOINT_URL": server.url,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
        }.items():
            monkeypatch.setenv(name, value)
        monkeypatch.setattr(s3, "RANGE_BACKOFF_S", 0.01)
        s3.reset()
        yield server
        s3.reset()


def _fetch(blob: Pattern, to: Path) -> NotFetchable:
    wanted = WantedFile("model.gguf", blob.size, blob.sha256())
    with pytest.raises(NotFetchable) as caught:
        fetch_files([wanted], [f"s3://{BUCKET}/m/"], to)
    assert not to.exists()
    return caught.value


@pytest.mark.parametrize("declared", [True, False])
def test_a_range_longer_than_asked_is_refused_at_the_byte_past_it(
    hostile: HostileServer, tmp_path: Path, declared: bool
) -> None:
    blob = Pattern(3 * MIB)
    key = f"/{BUCKET}/m/model.gguf"
    hostile.route("HEAD", key, s3_object(blob))
    hostile.route("GET", key, s3_object(blob, longer_by=100 * MIB, declared=declared))
    refused = _fetch(blob, tmp_path / "out").message
    assert "m/model.gguf: the answer to bytes 0-3145727" in refused
    if declared:
        assert "declares 108,003,328 bytes, longer than the 3,145,728 asked" in refused
    else:
        assert "is longer than the 3,145,728 asked; refused at byte 3,145,728" in refused
    assert "short read" not in refused
    assert len(hostile.requests_to(key, "GET")) == 1  # a lie is not asked again
    assert hostile.sent[key] < 3 * MIB + 32 * MIB


def test_a_dripping_range_costs_one_deadline(
    hostile: HostileServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(s3, "RANGE_DEADLINE_S", 1.0)
    monkeypatch.setattr(s3, "RANGE_MIN_BYTES_PER_S", 1 << 40)
    blob = Pattern(5000)
    key = f"/{BUCKET}/m/model.gguf"
    hostile.route("HEAD", key, s3_object(blob))
    hostile.route("GET", key, s3_object(blob, drip_s=0.2))
    started = time.monotonic()
    refused = _fetch(blob, tmp_path / "out").message
    assert time.monotonic() - started < 3.5
    assert "m/model.gguf bytes 0-4999: no complete answer within 1 s" in refused


def test_a_head_dripping_its_headers_costs_one_deadline(
    hostile: HostileServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(s3, "HEAD_DEADLINE_S", 1.0)
    blob = Pattern(5000)
    key = f"/{BUCKET}/m/model.gguf"
    hostile.route("HEAD", key, s3_object(blob, drip_s=0.2, drip_headers=True))
    wanted = WantedFile("model.gguf", blob.size, blob.sha256())
    started = time.monotonic()
    checked = check_location([wanted], f"s3://{BUCKET}/m/", tmp_path / "scratch")
    assert time.monotonic() - started < 3.5
    assert checked.ok is None  # this host could not ask in time: no fact about the bytes
    assert checked.detail == (
        f"model.gguf: HEAD s3://{BUCKET}/m/model.gguf: no complete answer within 1 s"
    )
    assert list((tmp_path / "scratch").iterdir()) == []
    assert hostile.requests_to(key, "GET") == []
