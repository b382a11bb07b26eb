"""The hostile-input corpus: one clear line, exit 2, no traceback, nothing written, bounded
memory — and a property-based fuzz of the two binary readers."""

from __future__ import annotations

import contextlib
import json
import struct
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from modelreg.errors import InvalidArtifact
from modelreg.manifests.gguf import read_gguf
from modelreg.manifests.safetensors import read_header
from tests.corpus.make_corpus import HERE, entries

ACCEPTED = {"gguf/unknown-tensor-type.gguf"}  # recorded with unknown types, on hold
PEAK_BYTES = 64 << 20


def _command(name: str) -> list[str]:
    path = HERE / name
    if name.startswith("targets/"):
        return ["targets", "apply"]  # the file is given through MODELREG_TARGETS
    if name.startswith("suites/"):
        return ["suite", "check", str(path)]
    if name.startswith("signatures/"):
        artifact = HERE / "gguf" / "unknown-tensor-type.gguf"
        return ["add", str(artifact), "--model-id", "corpus/model", "--signature", str(path)]
    if name.startswith("bundles/"):
        return ["add", str(path.parent), "--model-id", "corpus/model"]
    if name.startswith("imports/"):
        return ["import", str(path)]
    if name.startswith("cards/"):
        return ["card", "validate", str(path)]
    if name.startswith("manifests/"):
        return ["import", str(path)]
    if name.startswith("references/"):
        return ["diff", str(path), str(path)]
    if name.startswith("recipes/"):
        artifact = HERE / "gguf" / "unknown-tensor-type.gguf"  # accepted on its own
        return ["add", str(artifact), "--model-id", "corpus/model", "--recipe", str(path)]
    if name.startswith("safetensors/"):
        return ["add", str(path.parent), "--model-id", "corpus/model"]
    return ["add", str(path), "--model-id", "corpus/model"]


def test_corpus_on_disk_is_what_the_generator_writes() -> None:
    generated = entries()
    assert len(generated) >= 25
    for name, data in generated.items():
        assert (HERE / name).read_bytes() == data, (
            f"{name} is stale: python -m tests.corpus.make_corpus"
        )


@pytest.mark.parametrize("name", sorted(entries()))
def test_hostile_input_is_rejected_cleanly(cli, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if name.startswith("targets/"):
        monkeypatch.setenv("MODELREG_TARGETS", str(HERE / name))
    tracemalloc.start()
    code, out, err = cli(*_command(name))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < PEAK_BYTES, f"{name}: peak {peak} bytes"
    assert "Traceback" not in err and "internal error" not in err, err
    if name in ACCEPTED:
        assert code == 0 and "on hold" in err
        return
    assert code == 2, (name, code, out, err)
    assert err.count("\n") == 1 and err.startswith("error: "), err
    assert json.loads(cli("list", "--json")[1])["records"] == []


GGUF_SEED = (HERE / "gguf" / "truncated-in-data.gguf").read_bytes()


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_gguf_reader_raises_only_invalid_artifact(tmp_path: Path, data: st.DataObject) -> None:
    blob = bytearray(GGUF_SEED + b"\0" * 64)
    for _ in range(data.draw(st.integers(1, 8))):
        position = data.draw(st.integers(0, len(blob) - 1))
        blob[position] = data.draw(st.integers(0, 255))
    blob = blob[: data.draw(st.integers(0, len(blob)))]
    path = tmp_path / "fuzz.gguf"
    path.write_bytes(bytes(blob))
    with contextlib.suppress(InvalidArtifact):
        read_gguf(path)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    header=st.binary(max_size=200) | st.text(max_size=200).map(str.encode),
    declared=st.none() | st.integers(0, 2**64 - 1),
    tail=st.binary(max_size=64),
)
def test_safetensors_reader_raises_only_invalid_artifact(
    tmp_path: Path, header: bytes, declared: int | None, tail: bytes
) -> None:
    path = tmp_path / "fuzz.safetensors"
    path.write_bytes(
        struct.pack("<Q", len(header) if declared is None else declared) + header + tail
    )
    with contextlib.suppress(InvalidArtifact):
        read_header(path)
