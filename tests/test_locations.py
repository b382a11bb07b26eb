"""Where a record's bytes are: location URLs (validated, never carrying credentials) and
``fetch`` (file locations on this host and the local Hugging Face cache, every sha256 checked,
nothing left behind unless every file matched)."""

from __future__ import annotations

from pathlib import Path

import pytest

from modelreg import host
from modelreg.api import Registry
from modelreg.errors import InvalidInput, NotFetchable
from modelreg.locations import file_url, parse_location
from modelreg.s3 import NO_CREDENTIALS
from tests.helpers import record_of_files, write_gguf

COMMIT = "c" * 40


@pytest.mark.parametrize(
    ("url", "scheme", "where", "path"),
    [
        ("file://build-3/srv/models/alpha", "file", "build-3", "/srv/models/alpha"),
        ("file://build-3/srv/my%20models/a", "file", "build-3", "/srv/my models/a"),
        (f"hf://google/gemma-3-270m@{COMMIT}", "hf", "google/gemma-3-270m", COMMIT),
        ("s3://ml-artifacts/gemma/q8", "s3", "ml-artifacts", "gemma/q8"),
        (
            "oci://ghcr.io:443/acme/models/gemma:q8@sha256:" + "d" * 64,
            "oci",
            "ghcr.io:443",
            "acme/models/gemma@sha256:" + "d" * 64,
        ),
    ],
)
def test_locations_parse(url: str, scheme: str, where: str, path: str) -> None:
    parsed = parse_location(url)
    assert (parsed.url, parsed.scheme, parsed.where, parsed.path) == (url, scheme, where, path)


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("https://example.com/model.gguf", "scheme must be one of file://, hf://, s3://, oci://"),
        ("/srv/models/alpha", "scheme must be one of"),
        ("file:///srv/models/alpha", "a file location names its host"),
        ("file://build-3", "needs an absolute path after the host"),
        ("file://build-3/srv/../etc", "must not contain '..'"),
        ("file://bob:pw@build-3/srv/x", "carries credentials"),
        ("s3://AKIA:secret@bucket/key", "carries credentials"),
        ("s3://bucket/key?X-Amz-Signature=abc", "query strings and fragments are not allowed"),
        ("hf://google/gemma-3-270m@main", "not a pinned revision"),
        ("hf://google/gemma-3-270m", "not a pinned revision"),
        ("oci://ghcr.io/acme/gemma:latest", "not an OCI reference pinned by digest"),
        ("s3://B/key", "not an S3 bucket and prefix"),
        ("file://build 3/srv", "contains whitespace or control characters"),
        ("s3://bucket/" + "k" * 2000, "longer than 2000 characters"),
    ],
)
def test_malformed_locations_are_one_line_errors(url: str, reason: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_location(url)
    assert reason in caught.value.message
    assert "\n" not in str(caught.value) and caught.value.exit_code == 2


def _write(directory: Path, files: dict[str, bytes]) -> Path:
    for name, data in files.items():
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_bytes(data)
    return directory


FILES = {"model.gguf": b"weights" * 1000, "tokenizer/config.json": b'{"a": 1}'}


def test_add_records_this_hosts_path_and_fetch_copies_from_it(
    registry: Registry, tmp_path: Path
) -> None:
    (tmp_path / "src").mkdir()
    gguf = write_gguf(tmp_path / "src" / "tiny.gguf", {"token_embd.weight": (4, 8)})
    added = registry.add(
        [gguf],
        model_id="tiny/one",
        source="pypi://tiny==1",
        license_id="mit",
        locations=["s3://bucket/tiny"],
    )
    here = f"file://{host.hostname()}{tmp_path / 'src'}"
    assert added.locations == [here, "s3://bucket/tiny"]
    fetched = registry.fetch(added.record.record_id, tmp_path / "out")
    assert [(f.path, f.source) for f in fetched.files] == [("tiny.gguf", here)]
    assert (tmp_path / "out" / "tiny.gguf").read_bytes() == gguf.read_bytes()
    history = registry.history("tiny/one").events
    assert [(e.kind, e.summary) for e in history] == [
        ("add", ""),
        ("locate", f"can be fetched from {here}, s3://bucket/tiny"),
    ]


def test_a_mismatch_is_refused_and_the_next_location_is_used(
    registry: Registry, tmp_path: Path
) -> None:
    record = record_of_files(registry, FILES)
    tampered = _write(tmp_path / "tampered", FILES | {"model.gguf": b"WEIGHTS" * 1000})
    good = _write(tmp_path / "good", FILES)
    # Added unchecked: nothing tells fetch which copy is good, so it tries them in order.
    registry.locate(
        record, [file_url(tampered), "s3://bucket/x", file_url(good)], check_added=False
    )
    fetched = registry.fetch(record, tmp_path / "out")
    assert {f.path: f.source for f in fetched.files} == {
        "model.gguf": file_url(good),
        "tokenizer/config.json": file_url(tampered),
    }
    # What it read is recorded: the tampered copy holds other bytes.
    states = {loc.url: loc.checked for loc in registry.locations(record).locations}
    assert states[file_url(tampered)] is not None and not states[file_url(tampered)].ok
    assert states[file_url(good)] is None  # it gave one file: no check of the whole copy
    reasons = [p.reason for p in fetched.skipped]
    assert any(r == "model.gguf: " + NO_CREDENTIALS for r in reasons)
    assert any(r.startswith("model.gguf: MISMATCH — sha256 ") and "refused" in r for r in reasons)
    for name, data in FILES.items():
        assert (tmp_path / "out" / name).read_bytes() == data


def test_no_good_copy_leaves_nothing_behind(registry: Registry, tmp_path: Path) -> None:
    record = record_of_files(registry, FILES)
    tampered = _write(tmp_path / "tampered", FILES | {"tokenizer/config.json": b'{"a": 2}'})
    registry.locate(record, [file_url(tampered), file_url(tmp_path / "gone"), "file://elsewhere/x"])
    with pytest.raises(NotFetchable) as caught:
        registry.fetch(record, tmp_path / "out")
    message = caught.value.message
    assert message.startswith("tokenizer/config.json: no location has it with sha256 ")
    assert "MISMATCH" in message and "on host elsewhere, not this one" in message
    assert caught.value.exit_code == 1
    # Neither the destination nor the staging directory beside it (.out.fetch-…) is left.
    assert [p.name for p in tmp_path.iterdir() if "out" in p.name] == []


def test_fetch_refuses_a_destination_that_holds_files(registry: Registry, tmp_path: Path) -> None:
    record = record_of_files(registry, FILES)
    registry.locate(record, [file_url(_write(tmp_path / "good", FILES))])
    occupied = tmp_path / "occupied"
    occupied.mkdir()
    (occupied / "keep.txt").write_text("mine")
    with pytest.raises(InvalidInput, match="exists and is not an empty directory"):
        registry.fetch(record, occupied)
    assert [p.name for p in occupied.iterdir()] == ["keep.txt"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert len(registry.fetch(record, empty).files) == 2


def test_fetch_from_the_local_hugging_face_cache(
    registry: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from modelreg.bundled import lay_out_hf_cache

    files = {"model.safetensors": b"\x00" * 4096, "config.json": b'{"model_type": "x"}'}
    checkpoint = _write(tmp_path / "checkpoint", files)
    cache = tmp_path / "hub"
    lay_out_hf_cache(checkpoint, cache, "org/tiny", COMMIT)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    record = record_of_files(registry, files)
    registry.locate(record, [f"hf://org/tiny@{COMMIT}", f"hf://org/other@{COMMIT}"])
    fetched = registry.fetch(record, tmp_path / "out")
    assert {f.source for f in fetched.files} == {f"hf://org/tiny@{COMMIT}"}
    (skipped,) = fetched.skipped
    assert skipped.url == f"hf://org/other@{COMMIT}"
    assert skipped.reason.startswith("not in the local Hugging Face cache")
    for name, data in files.items():
        assert (tmp_path / "out" / name).read_bytes() == data
