"""The safetensors header reader: real checkpoint, sharded checkpoints, hostile headers."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from modelreg.errors import InvalidArtifact, InvalidInput
from modelreg.manifests.build import build_manifest
from modelreg.manifests.safetensors import read_checkpoint, read_header


def test_real_checkpoint_header(smollm2_st: Path) -> None:
    ckpt = read_checkpoint(smollm2_st)
    assert len(ckpt.tensors) == 272
    assert {t.dtype for t in ckpt.tensors} == {"BF16"}
    assert sum(t.n_elements for t in ckpt.tensors) == 134_515_008
    assert not any(t.name == "lm_head.weight" for t in ckpt.tensors)  # tied


def test_smollm2_checkpoint_manifest(smollm2_st: Path) -> None:
    m = build_manifest(
        [smollm2_st], model_id="HuggingFaceTB/SmolLM2-135M-Instruct", license_id="apache-2.0"
    ).manifest
    assert m.format == "safetensors" and m.runtime.runtime == "transformers"
    assert m.parameters.total.value == 134_515_008  # the tied embedding counted once
    assert m.architecture.tied_embeddings is True and m.architecture.head_count_kv == 3
    assert m.quantization is not None
    assert {k: v.tensors for k, v in m.quantization.tensor_types.items()} == {"BF16": 272}
    roles = {f.path: f.role for f in m.files}
    assert roles["config.json"] == "config" and roles["tokenizer.json"] == "tokenizer"
    assert roles["chat_template.jinja"] == "chat_template"
    assert roles["model.safetensors"] == "weights"
    assert m.notes == []  # the config implies exactly the tensors' parameter count


def _sharded(tmp_path: Path) -> Path:
    d = tmp_path / "ckpt"
    d.mkdir()
    save_file(
        {"a": np.zeros((4, 4), np.float32), "b": np.zeros(8, np.float16)},
        str(d / "model-00001-of-00002.safetensors"),
    )
    save_file({"c": np.zeros((2, 3), np.float32)}, str(d / "model-00002-of-00002.safetensors"))
    index = {
        "metadata": {},
        "weight_map": {
            "a": "model-00001-of-00002.safetensors",
            "b": "model-00001-of-00002.safetensors",
            "c": "model-00002-of-00002.safetensors",
        },
    }
    (d / "model.safetensors.index.json").write_text(json.dumps(index))
    return d


def test_sharded_checkpoint_through_its_index(tmp_path: Path) -> None:
    ckpt = read_checkpoint(_sharded(tmp_path))
    assert [t.name for t in ckpt.tensors] == ["a", "b", "c"]
    assert ckpt.index is not None and len(ckpt.files) == 2


def test_index_naming_a_missing_shard(tmp_path: Path) -> None:
    d = _sharded(tmp_path)
    (d / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(InvalidArtifact, match="missing"):
        read_checkpoint(d)


def test_index_disagreeing_with_shards(tmp_path: Path) -> None:
    d = _sharded(tmp_path)
    index = json.loads((d / "model.safetensors.index.json").read_text())
    index["weight_map"]["z"] = "model-00002-of-00002.safetensors"
    (d / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(InvalidArtifact, match="does not hold it"):
        read_checkpoint(d)


def test_tensor_stored_in_two_shards(tmp_path: Path) -> None:
    d = _sharded(tmp_path)
    save_file({"a": np.zeros((4, 4), np.float32)}, str(d / "model-00002-of-00002.safetensors"))
    with pytest.raises(InvalidArtifact, match="'a'"):
        read_checkpoint(d)


def _file(tmp_path: Path, header: bytes, data: bytes = b"", declared: int | None = None) -> Path:
    path = tmp_path / "bad.safetensors"
    path.write_bytes(
        struct.pack("<Q", len(header) if declared is None else declared) + header + data
    )
    return path


@pytest.mark.parametrize(
    ("header", "data", "declared", "message"),
    [
        (b"{}", b"", 10**6, "larger than the file"),
        (b"{not json", b"", None, "not valid JSON"),
        (
            b'{"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},'
            b' "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}',
            b"\0" * 12,
            None,
            "overlap",
        ),
        (
            b'{"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}',
            b"\0" * 8,
            None,
            "past the end",
        ),
        (
            b'{"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 8]}}',
            b"\0" * 8,
            None,
            "needs 16 bytes",
        ),
        (b'{"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 0]}}', b"", None, "shape"),
    ],
)
def test_hostile_headers(
    tmp_path: Path, header: bytes, data: bytes, declared: int | None, message: str
) -> None:
    with pytest.raises(InvalidArtifact, match=message):
        read_header(_file(tmp_path, header, data, declared))


def test_config_that_is_not_json_is_bad_input(tmp_path: Path) -> None:
    d = _sharded(tmp_path)
    (d / "config.json").write_text("{oops")
    with pytest.raises(InvalidInput, match=r"config.json: not valid JSON"):
        build_manifest([d], model_id="t/x")


def test_header_read_does_not_touch_tensor_data(tmp_path: Path) -> None:
    # A 10 GiB sparse shard: reading its header must not read (or allocate) the data.
    path = tmp_path / "big.safetensors"
    n = 10 * 2**30 // 2
    header = json.dumps({"w": {"dtype": "BF16", "shape": [n], "data_offsets": [0, n * 2]}})
    with path.open("wb") as fh:
        fh.write(struct.pack("<Q", len(header)) + header.encode())
        fh.truncate(8 + len(header) + n * 2)
    ((tensor,), _) = read_header(path)
    assert tensor.n_bytes == 10 * 2**30
