"""The GGUF header reader against the two real PyPI models and hostile synthetic files."""

from __future__ import annotations

import struct
from collections import Counter
from pathlib import Path

import pytest

from modelreg.errors import InvalidArtifact
from modelreg.manifests.gguf import SkippedArray, read_gguf
from tests.helpers import kv_nested_array, kv_str, kv_u32, raw_gguf, tensor_info, write_gguf


def test_reads_smollm2_tensor_table(smollm2: Path) -> None:
    header = read_gguf(smollm2)
    assert header.version == 3
    assert header.tensor_count == 272
    assert Counter(t.type_name for t in header.tensors) == {"Q4_1": 210, "F32": 61, "Q8_0": 1}
    assert sum(t.n_elements for t in header.tensors) == 134_515_008
    assert sum(t.n_bytes or 0 for t in header.tensors) == 96_576_768
    assert header.get("general.license") == "apache-2.0"
    assert "tokenizer.chat_template" in header.metadata


def test_reads_gemma_header_and_skips_the_vocabulary(gemma: Path) -> None:
    header = read_gguf(gemma)
    assert header.tensor_count == 236
    assert Counter(t.type_name for t in header.tensors) == {
        "F32": 109,
        "Q5_0": 81,
        "Q4_K": 27,
        "Q8_0": 10,
        "Q6_K": 9,
    }
    assert sum(t.n_elements for t in header.tensors) == 268_098_176
    assert sum(t.n_bytes or 0 for t in header.tensors) == 246_587_904
    assert header.get("general.file_type") == 15
    tokens = header.get("tokenizer.ggml.tokens")
    assert tokens == SkippedArray("string", 262_144)


def test_matches_ggufreader_on_a_small_file(tmp_path: Path) -> None:
    from gguf import GGUFReader

    path = write_gguf(
        tmp_path / "m.gguf",
        {"token_embd.weight": (8, 4), "blk.0.attn_q.weight": (4, 4)},
        metadata={"llama.block_count": 1, "general.name": "tiny", "llama.head_counts": [2, 3]},
    )
    ours = read_gguf(path)
    theirs = GGUFReader(path)
    assert [t.name for t in ours.tensors] == [t.name for t in theirs.tensors]
    assert [t.shape for t in ours.tensors] == [
        tuple(int(d) for d in t.shape) for t in theirs.tensors
    ]
    assert [t.offset for t in ours.tensors] == [
        int(t.data_offset) - ours.data_offsets[0] for t in theirs.tensors
    ]
    assert ours.get("llama.head_counts") == [2, 3]
    assert ours.get("general.name") == "tiny"


def test_reads_a_split_set_from_any_shard(tmp_path: Path) -> None:
    tensors = {f"blk.{i}.attn_q.weight": (4, 4) for i in range(5)}
    write_gguf(tmp_path / "m.gguf", tensors, split_max_tensors=2)
    shards = sorted(tmp_path.glob("m-*-of-*.gguf"))
    assert len(shards) == 3
    header = read_gguf(shards[1])
    assert header.paths == shards
    assert header.tensor_count == 5
    assert {t.shard for t in header.tensors} == {0, 1, 2}


def test_missing_shard_is_named(tmp_path: Path) -> None:
    write_gguf(tmp_path / "m.gguf", {f"t{i}": (4,) for i in range(4)}, split_max_tensors=2)
    (tmp_path / "m-00002-of-00002.gguf").unlink()
    with pytest.raises(InvalidArtifact, match="m-00002-of-00002.gguf.*missing"):
        read_gguf(tmp_path / "m-00001-of-00002.gguf")


def test_unknown_tensor_type_is_recorded_not_fatal(tmp_path: Path) -> None:
    path = tmp_path / "u.gguf"
    path.write_bytes(raw_gguf(tensors=[tensor_info("w", [32], ggml_type=140)], data=b"\0" * 64))
    (tensor,) = read_gguf(path).tensors
    assert tensor.type_name == "unknown(140)"
    assert tensor.n_bytes is None
    assert tensor.n_elements == 32


def _bad(tmp_path: Path, data: bytes) -> InvalidArtifact:
    path = tmp_path / "bad.gguf"
    path.write_bytes(data)
    with pytest.raises(InvalidArtifact) as info:
        read_gguf(path)
    assert str(path) in str(info.value)
    return info.value


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"GGML" + b"\0" * 40, "bad magic"),
        (raw_gguf(version=1), "version 1 is not supported"),
        (raw_gguf(version=99), "version 99"),
        (raw_gguf(kv_count=2**60), "kv count 1152921504606846976 cannot fit"),
        (raw_gguf(tensor_count=2**40), "tensor count"),
        (
            raw_gguf(kvs=[kv_str("general.name", "abc", declared_len=10**9)]),
            "needs 1000000000 bytes",
        ),
        (raw_gguf(tensors=[tensor_info("w", [1] * 9)]), "9 dimensions"),
        (raw_gguf(tensors=[tensor_info("w", [32], offset=4096)], data=b"\0" * 128), "past the end"),
        (raw_gguf(tensors=[tensor_info("w", [8], offset=3)], data=b"\0" * 128), "not aligned"),
        (
            raw_gguf(
                tensors=[tensor_info("w", [8]), tensor_info("w", [8], offset=32)], data=b"\0" * 128
            ),
            "appears twice",
        ),
        (raw_gguf(kvs=[kv_u32(b"\xff\xfekey", 1)]), "not UTF-8"),
        (raw_gguf(kvs=[kv_u32("general.alignment", 0)]), "power of two"),
        (raw_gguf(kvs=[kv_u32("general.alignment", 3)]), "power of two"),
        (b"GGUF\x03\0\0\0", "too small"),
        (raw_gguf(kvs=[kv_nested_array("x", 100_000)]), "nests arrays more than 8 levels deep"),
        (raw_gguf(kvs=[kv_nested_array("x", 3, outer_length=2**40)]), "claims 1099511627776"),
    ],
)
def test_hostile_headers_give_one_clear_error(tmp_path: Path, data: bytes, message: str) -> None:
    error = _bad(tmp_path, data)
    assert message in str(error)
    assert "\n" not in str(error)


def test_truncated_real_file_names_the_offset(tmp_path: Path, gemma: Path) -> None:
    with gemma.open("rb") as fh:
        head = fh.read(1_000_000)
    error = _bad(tmp_path, head)
    assert error.offset is not None and error.offset <= 1_000_000
    assert "truncated" in str(error)


def test_truncation_at_every_header_section_is_caught(tmp_path: Path, smollm2: Path) -> None:
    header = read_gguf(smollm2)
    data_start = header.data_offsets[0]
    with smollm2.open("rb") as fh:
        full_header = fh.read(data_start + 4096)
    # magic, version, counts, inside the KV section, inside the tensor table, data section
    for cut in (2, 6, 14, 22, 30, 1_000, data_start // 2, data_start - 1, data_start + 100):
        _bad(tmp_path, full_header[:cut])


def test_kv_value_of_unknown_type_is_rejected(tmp_path: Path) -> None:
    kv = struct.pack("<Q", 1) + b"k" + struct.pack("<I", 77) + b"\0" * 8
    assert "unknown value type 77" in str(_bad(tmp_path, raw_gguf(kvs=[kv])))


def test_nested_arrays_within_the_limit_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "nested.gguf"
    path.write_bytes(raw_gguf(kvs=[kv_nested_array("x", 8), kv_u32("after", 5)]))
    header = read_gguf(path)
    assert header.get("x") == SkippedArray("array", 1)
    assert header.get("after") == 5


def test_deeply_nested_arrays_fail_at_the_offset_of_the_array_too_deep(tmp_path: Path) -> None:
    error = _bad(tmp_path, raw_gguf(kvs=[kv_nested_array("x", 9)]))
    # header (24) + key (8 + 1) + value type (4) + 8 array headers of 12 bytes
    assert error.offset == 24 + 9 + 4 + 8 * 12
    assert error.field == "nested array"


def test_static_type_tables_match_the_gguf_package_entry_by_entry() -> None:
    """gguf.py copies the package's type tables so that a header read imports no numpy; a
    gguf release that adds, renames or resizes a type must fail here, not change manifests."""
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, LlamaFileType

    from modelreg.manifests.gguf import GGML_TYPES, LLAMA_FILE_TYPES
    from modelreg.manifests.tensor_types import EXTRA_TENSOR_TYPES

    assert set(GGML_QUANT_SIZES) == set(GGMLQuantizationType)
    package = {int(t): (t.name, *GGML_QUANT_SIZES[t]) for t in GGMLQuantizationType}
    for type_id in sorted(set(package) | set(GGML_TYPES)):
        assert GGML_TYPES.get(type_id) == package.get(type_id), f"ggml type {type_id}"
    assert {int(t): t.name for t in LlamaFileType} == LLAMA_FILE_TYPES
    # The ik_llama.cpp types keep their own ids (the package's table would shadow them).
    assert not set(EXTRA_TENSOR_TYPES) & set(GGML_TYPES)
