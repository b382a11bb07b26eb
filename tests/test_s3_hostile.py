"""S3 locations against a hostile S3 API (``tests.hostile``): a range answered longer than
asked is refused at the byte that passes it ("longer than", never "short read"), a dripping
store costs one deadline per request (in its headers or its body), and one probe of a location
at a time. The honest path is ``tests/test_s3.py`` (moto's server)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from modelreg import s3
from modelreg.errors import NotFetchable
from modelreg.locations import WantedFile, fetch_files
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
    hostile: HostileServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(s3, "HEAD_DEADLINE_S", 1.0)
    blob = Pattern(5000)
    key = f"/{BUCKET}/m/model.gguf"
    hostile.route("HEAD", key, s3_object(blob, drip_s=0.2, drip_headers=True))
    started = time.monotonic()
    problem = s3.has_copy(BUCKET, "m/", [("model.gguf", 5000)], f"s3://{BUCKET}/m/")
    assert time.monotonic() - started < 3.5
    assert problem == f"model.gguf: HEAD s3://{BUCKET}/m/model.gguf: no complete answer within 1 s"


def test_concurrent_probes_of_one_location_send_one_head(hostile: HostileServer) -> None:
    blob = Pattern(5000)
    key = f"/{BUCKET}/m/model.gguf"
    slow = s3_object(blob)

    def answer(request):  # type: ignore[no-untyped-def]
        time.sleep(0.5)
        return slow(request)  # type: ignore[operator]

    hostile.route("HEAD", key, answer)
    answers: list[str | None] = []

    def probe() -> None:
        answers.append(s3.has_copy(BUCKET, "m/", [("model.gguf", 5000)], f"s3://{BUCKET}/m/"))

    threads = [threading.Thread(target=probe) for _ in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers == [None] * 10
    assert len(hostile.requests_to(key, "HEAD")) == 1
