"""GGUF header reader: metadata and tensor table, never the tensor data.

``gguf.GGUFReader`` builds a numpy object for every array element (20 s for a 262k-token
vocabulary) and raises on tensor type ids it does not know, losing all metadata. This reader
uses a copy of ``gguf``'s type constants (``GGML_TYPES``, so that reading a header imports
neither ``gguf`` nor numpy; tests/manifests/test_gguf.py fails when the package drifts from it)
and ``tensor_types`` for ik_llama.cpp's row-interleaved types, which the package lacks. It skips
array payloads (keeping their element type and length), records tensor types neither knows as
unknown, and checks every length and offset against the file size so a truncated or hostile
file is an ``InvalidArtifact`` naming the offset.
"""

from __future__ import annotations

import hashlib
import mmap
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from modelreg.errors import InvalidArtifact
from modelreg.manifests.tensor_types import EXTRA_TENSOR_TYPES

GGUF_MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
MAX_DIMS = 4
DEFAULT_ALIGNMENT = 32
# Numeric arrays up to this length are kept (per-layer head counts, sliding-window patterns);
# longer arrays and every string array keep only their element type and length.
KEEP_ARRAY_MAX = 4096
# Arrays of arrays are legal GGUF but unused by llama.cpp; deeper than this is hostile.
MAX_ARRAY_NESTING = 8
# Smallest possible encodings, used to reject absurd counts before looping over them.
_MIN_KV_BYTES = 8 + 4 + 1  # key length, value type, one byte of value
_MIN_TENSOR_INFO_BYTES = 8 + 4 + 8 + 4 + 8  # name length, n_dims, one dim, type, offset
_ARRAY_HEADER_BYTES = 4 + 8  # element type, length
SPLIT_RE = re.compile(r"^(?P<stem>.+)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$")

# GGUF value type ids -> (struct format, size, name). 8 = string and 9 = array are special.
_SCALARS: dict[int, tuple[str, int, str]] = {
    0: ("<B", 1, "uint8"),
    1: ("<b", 1, "int8"),
    2: ("<H", 2, "uint16"),
    3: ("<h", 2, "int16"),
    4: ("<I", 4, "uint32"),
    5: ("<i", 4, "int32"),
    6: ("<f", 4, "float32"),
    7: ("<?", 1, "bool"),
    10: ("<Q", 8, "uint64"),
    11: ("<q", 8, "int64"),
    12: ("<d", 8, "float64"),
}
_STRING, _ARRAY = 8, 9

# ggml tensor type id -> (name, elements per block, bytes per block): the gguf package's
# GGMLQuantizationType and GGML_QUANT_SIZES (gguf 0.19.0), copied because importing them pulls
# in numpy (~70 ms of every `modelreg inspect`). test_gguf.py compares the two entry by entry.
GGML_TYPES: dict[int, tuple[str, int, int]] = {
    0: ("F32", 1, 4),
    1: ("F16", 1, 2),
    2: ("Q4_0", 32, 18),
    3: ("Q4_1", 32, 20),
    6: ("Q5_0", 32, 22),
    7: ("Q5_1", 32, 24),
    8: ("Q8_0", 32, 34),
    9: ("Q8_1", 32, 40),
    10: ("Q2_K", 256, 84),
    11: ("Q3_K", 256, 110),
    12: ("Q4_K", 256, 144),
    13: ("Q5_K", 256, 176),
    14: ("Q6_K", 256, 210),
    15: ("Q8_K", 256, 292),
    16: ("IQ2_XXS", 256, 66),
    17: ("IQ2_XS", 256, 74),
    18: ("IQ3_XXS", 256, 98),
    19: ("IQ1_S", 256, 50),
    20: ("IQ4_NL", 32, 18),
    21: ("IQ3_S", 256, 110),
    22: ("IQ2_S", 256, 82),
    23: ("IQ4_XS", 256, 136),
    24: ("I8", 1, 1),
    25: ("I16", 1, 2),
    26: ("I32", 1, 4),
    27: ("I64", 1, 8),
    28: ("F64", 1, 8),
    29: ("IQ1_M", 256, 56),
    30: ("BF16", 1, 2),
    34: ("TQ1_0", 256, 54),
    35: ("TQ2_0", 256, 66),
    39: ("MXFP4", 32, 17),
    40: ("NVFP4", 64, 36),
    41: ("Q1_0", 128, 18),
}
_TYPE_NAMES = {type_id: name for type_id, (name, _, _) in GGML_TYPES.items()}
_TYPE_SIZES = {type_id: (block, size) for type_id, (_, block, size) in GGML_TYPES.items()}
# general.file_type id -> the gguf package's LlamaFileType name (gguf 0.19.0), same reason and
# the same test.
LLAMA_FILE_TYPES: dict[int, str] = {
    0: "ALL_F32",
    1: "MOSTLY_F16",
    2: "MOSTLY_Q4_0",
    3: "MOSTLY_Q4_1",
    7: "MOSTLY_Q8_0",
    8: "MOSTLY_Q5_0",
    9: "MOSTLY_Q5_1",
    10: "MOSTLY_Q2_K",
    11: "MOSTLY_Q3_K_S",
    12: "MOSTLY_Q3_K_M",
    13: "MOSTLY_Q3_K_L",
    14: "MOSTLY_Q4_K_S",
    15: "MOSTLY_Q4_K_M",
    16: "MOSTLY_Q5_K_S",
    17: "MOSTLY_Q5_K_M",
    18: "MOSTLY_Q6_K",
    19: "MOSTLY_IQ2_XXS",
    20: "MOSTLY_IQ2_XS",
    21: "MOSTLY_Q2_K_S",
    22: "MOSTLY_IQ3_XS",
    23: "MOSTLY_IQ3_XXS",
    24: "MOSTLY_IQ1_S",
    25: "MOSTLY_IQ4_NL",
    26: "MOSTLY_IQ3_S",
    27: "MOSTLY_IQ3_M",
    28: "MOSTLY_IQ2_S",
    29: "MOSTLY_IQ2_M",
    30: "MOSTLY_IQ4_XS",
    31: "MOSTLY_IQ1_M",
    32: "MOSTLY_BF16",
    36: "MOSTLY_TQ1_0",
    37: "MOSTLY_TQ2_0",
    38: "MOSTLY_MXFP4_MOE",
    39: "MOSTLY_NVFP4",
    40: "MOSTLY_Q1_0",
    1024: "GUESSED",
}

# llama.cpp file types whose default tensor type is not their name minus a size suffix
# (llama_model_quantize_impl: IQ3_XS and IQ3_M quantize to IQ3_S, IQ2_M to IQ2_S).
_FILE_TYPE_BASE = {"IQ3_XS": "IQ3_S", "IQ3_M": "IQ3_S", "IQ2_M": "IQ2_S", "MXFP4_MOE": "MXFP4"}
_SIZE_SUFFIXES = ("_XXS", "_XS", "_S", "_M", "_L")
GGML_TYPES_BY_NAME: dict[str, tuple[int, int]] = {
    name: (block, size) for name, block, size in GGML_TYPES.values()
}


def file_type_base(name: str) -> str | None:
    """The ggml tensor type a llama.cpp file type is built on: ``Q4_K_M`` -> ``Q4_K``,
    ``IQ3_M`` -> ``IQ3_S``, ``Q8_0`` -> ``Q8_0``; None when ggml has no such type."""
    name = name.strip().upper()
    candidates = [name, _FILE_TYPE_BASE.get(name, "")] + [
        name.removesuffix(s) for s in _SIZE_SUFFIXES
    ]
    return next((c for c in candidates if c in GGML_TYPES_BY_NAME), None)


@dataclass(frozen=True)
class SkippedArray:
    """An array whose payload was not materialised (strings, or longer than KEEP_ARRAY_MAX)."""

    element_type: str
    length: int


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]  # innermost dimension first, as stored
    type_id: int
    type_name: str  # "Q4_K", "Q8_0_R8" (tensor_types), or "unknown(140)" for ids unknown here
    offset: int  # relative to the data section of its shard
    n_elements: int
    n_bytes: int | None  # None when the type is unknown
    shard: int = 0


@dataclass
class GGUFHeader:
    """Header of one GGUF artifact (all shards of a split set merged)."""

    paths: list[Path]
    version: int
    kv_count: int
    metadata: dict[str, Any]
    tensors: list[TensorInfo]
    alignment: int
    data_offsets: list[int] = field(default_factory=list)  # per shard: start of tensor data
    # key -> sha256 of the key/value's raw bytes in the first shard (values we skip included)
    kv_digests: dict[str, str] = field(default_factory=dict)

    @property
    def tensor_count(self) -> int:
        return len(self.tensors)

    def get(self, key: str, default: Any = None) -> Any:
        return self.metadata.get(key, default)

    def arch_key(self, suffix: str, default: Any = None) -> Any:
        """``{general.architecture}.{suffix}``, e.g. ``arch_key('block_count')``."""
        arch = self.metadata.get("general.architecture")
        if not isinstance(arch, str):
            return default
        return self.metadata.get(f"{arch}.{suffix}", default)


def _type_tables() -> tuple[dict[int, str], dict[int, tuple[int, int]]]:
    return _TYPE_NAMES, _TYPE_SIZES


class _Cursor:
    """Bounds-checked little-endian reads over a memory map."""

    def __init__(self, buf: mmap.mmap | bytes, path: Path) -> None:
        self.buf = buf
        self.size = len(buf)
        self.pos = 0
        self.path = path

    def fail(self, reason: str, field_name: str | None = None, offset: int | None = None) -> None:
        raise InvalidArtifact(
            self.path, reason, offset=self.pos if offset is None else offset, field=field_name
        )

    def need(self, n: int, what: str) -> None:
        if n < 0 or self.pos + n > self.size:
            self.fail(
                f"{what} needs {n} bytes but the file ends at {self.size} (truncated or corrupt)",
                what,
            )

    def unpack(self, fmt: str, size: int, what: str) -> Any:
        self.need(size, what)
        (value,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += size
        return value

    def u32(self, what: str) -> int:
        return int(self.unpack("<I", 4, what))

    def u64(self, what: str) -> int:
        return int(self.unpack("<Q", 8, what))

    def raw_string(self, what: str) -> bytes:
        length = self.u64(f"{what} length")
        self.need(length, what)
        start = self.pos
        self.pos += length
        return bytes(self.buf[start : self.pos])


def _read_value(cur: _Cursor, vtype: int, key: str) -> Any:
    if vtype in _SCALARS:
        fmt, size, _ = _SCALARS[vtype]
        return cur.unpack(fmt, size, f"value of {key}")
    if vtype == _STRING:
        return cur.raw_string(f"value of {key}").decode("utf-8", errors="replace")
    if vtype == _ARRAY:
        return _read_array(cur, key)
    cur.fail(f"unknown value type {vtype} for key {key!r}", "metadata value type", cur.pos - 4)
    raise AssertionError("unreachable")


def _read_array(cur: _Cursor, key: str) -> list[Any] | SkippedArray:
    etype = cur.u32(f"array type of {key}")
    length = cur.u64(f"array length of {key}")
    if etype == _ARRAY:
        _skip_nested_arrays(cur, key, length)
        return SkippedArray("array", length)
    return _read_flat_array(cur, key, etype, length)


def _read_flat_array(cur: _Cursor, key: str, etype: int, length: int) -> list[Any] | SkippedArray:
    """An array of scalars (kept when short) or strings (skipped)."""
    if etype in _SCALARS:
        fmt, size, name = _SCALARS[etype]
        if length > cur.size:  # cheap guard before multiplying
            cur.fail(f"array {key!r} claims {length} elements", f"array length of {key}")
        cur.need(length * size, f"array payload of {key}")
        if length <= KEEP_ARRAY_MAX:
            values = list(struct.unpack_from(f"<{length}{fmt[1]}", cur.buf, cur.pos))
            cur.pos += length * size
            return values
        cur.pos += length * size
        return SkippedArray(name, length)
    if etype == _STRING:
        if length > (cur.size - cur.pos) // 8:
            cur.fail(f"array {key!r} claims {length} strings", f"array length of {key}")
        unpack_from, buf, size, pos = struct.unpack_from, cur.buf, cur.size, cur.pos
        for _ in range(length):
            if pos + 8 > size:
                cur.pos = pos
                cur.need(8, f"string length in {key}")
            (n,) = unpack_from("<Q", buf, pos)
            pos += 8 + n
            if pos > size:
                cur.pos = pos - n
                cur.need(n, f"string in {key}")
        cur.pos = pos
        return SkippedArray("string", length)
    cur.fail(f"unknown array element type {etype} for key {key!r}", "array type", cur.pos - 12)
    raise AssertionError("unreachable")


def _skip_nested_arrays(cur: _Cursor, key: str, length: int) -> None:
    """Skip an array of arrays (legal, unused by llama.cpp) without recursion: a hostile file
    nesting arrays thousands deep would otherwise end in a RecursionError."""
    remaining = [length]  # elements still to skip, per nesting level
    while remaining:
        if remaining[-1] == 0:
            remaining.pop()
            continue
        # Every element is at least a 12-byte array header: an absurd count fails here.
        if remaining[-1] > (cur.size - cur.pos) // _ARRAY_HEADER_BYTES:
            cur.fail(f"array {key!r} claims {remaining[-1]} nested arrays", "nested array")
        if len(remaining) + 1 > MAX_ARRAY_NESTING:
            cur.fail(
                f"array {key!r} nests arrays more than {MAX_ARRAY_NESTING} levels deep",
                "nested array",
            )
        remaining[-1] -= 1
        etype = cur.u32(f"array type in {key}")
        inner = cur.u64(f"array length in {key}")
        if etype == _ARRAY:
            remaining.append(inner)
        else:
            _read_flat_array(cur, key, etype, inner)


def _read_shard(path: Path, shard: int) -> GGUFHeader:
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise InvalidArtifact(path, "file not found") from None
    except OSError as exc:
        raise InvalidArtifact(path, f"cannot read: {exc.strerror}") from None
    if size < 24:
        raise InvalidArtifact(path, f"only {size} bytes: too small to be a GGUF file", offset=0)
    with path.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        return _parse(_Cursor(buf, path), path, shard)


def _parse(cur: _Cursor, path: Path, shard: int) -> GGUFHeader:
    if cur.buf[:4] != GGUF_MAGIC:
        raise InvalidArtifact(
            path, f"bad magic {bytes(cur.buf[:4])!r}, expected b'GGUF'", offset=0, field="magic"
        )
    cur.pos = 4
    version = cur.u32("version")
    if version not in SUPPORTED_VERSIONS:
        hint = (
            " (big-endian files are not supported)"
            if version >> 16 and not version & 0xFFFF
            else ""
        )
        cur.fail(f"GGUF version {version} is not supported{hint}; expected 2 or 3", "version", 4)
    tensor_count = cur.u64("tensor count")
    kv_count = cur.u64("kv count")
    if kv_count > (cur.size - cur.pos) // _MIN_KV_BYTES:
        cur.fail(f"kv count {kv_count} cannot fit in a {cur.size}-byte file", "kv count", 16)
    if tensor_count > (cur.size - cur.pos) // _MIN_TENSOR_INFO_BYTES:
        cur.fail(
            f"tensor count {tensor_count} cannot fit in a {cur.size}-byte file", "tensor count", 8
        )

    metadata: dict[str, Any] = {}
    kv_digests: dict[str, str] = {}
    for _ in range(kv_count):
        key_at = cur.pos
        raw_key = cur.raw_string("metadata key")
        try:
            key = raw_key.decode("utf-8")
        except UnicodeDecodeError:
            cur.fail(f"metadata key {raw_key[:40]!r} is not UTF-8", "metadata key", key_at)
        if key in metadata:
            cur.fail(f"metadata key {key!r} appears twice", "metadata key", key_at)
        vtype = cur.u32(f"value type of {key}")
        metadata[key] = _read_value(cur, vtype, key)
        kv_digests[key] = hashlib.sha256(cur.buf[key_at : cur.pos]).hexdigest()

    alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    if (
        not isinstance(alignment, int)
        or isinstance(alignment, bool)
        or alignment <= 0
        or (alignment & (alignment - 1))
    ):
        cur.fail(f"general.alignment {alignment!r} is not a positive power of two", "alignment")

    type_names, type_sizes = _type_tables()
    tensors: list[TensorInfo] = []
    seen: set[str] = set()
    for _ in range(tensor_count):
        info_at = cur.pos
        try:
            name = cur.raw_string("tensor name").decode("utf-8")
        except UnicodeDecodeError:
            cur.fail("tensor name is not UTF-8", "tensor name", info_at)
        if name in seen:
            cur.fail(f"tensor {name!r} appears twice", "tensor info", info_at)
        seen.add(name)
        n_dims = cur.u32(f"n_dims of {name}")
        if not 1 <= n_dims <= MAX_DIMS:
            cur.fail(
                f"tensor {name!r} has {n_dims} dimensions (1 to {MAX_DIMS} allowed)",
                "n_dims",
                cur.pos - 4,
            )
        shape = tuple(cur.u64(f"dims of {name}") for _ in range(n_dims))
        n_elements = 1
        for dim in shape:
            n_elements *= dim
        if n_elements >= 1 << 56:
            cur.fail(f"tensor {name!r} claims {n_elements} elements", "dims", info_at)
        type_id = cur.u32(f"type of {name}")
        offset = cur.u64(f"offset of {name}")
        n_bytes: int | None = None
        extra = EXTRA_TENSOR_TYPES.get(type_id) if type_id not in type_names else None
        if type_id in type_sizes:
            block, type_size = type_sizes[type_id]
            if n_elements % block:
                cur.fail(
                    f"tensor {name!r}: {n_elements} elements is not a multiple of the "
                    f"{type_names[type_id]} block size {block}",
                    "dims",
                    info_at,
                )
            n_bytes = n_elements // block * type_size
        elif extra is not None:
            # ggml_nbytes: rows × ggml_row_size, which may carry per-row scales ahead of the
            # blocks, so the row length must be a whole number of blocks.
            row = shape[0]
            if row % extra.block_size:
                cur.fail(
                    f"tensor {name!r}: rows of {row} elements are not a multiple of the "
                    f"{extra.name} block size {extra.block_size}",
                    "dims",
                    info_at,
                )
            n_bytes = (n_elements // row) * extra.row_bytes(row) if row else 0
        type_name = (
            type_names.get(type_id)
            or (extra.name if extra is not None else None)
            or f"unknown({type_id})"
        )
        tensors.append(
            TensorInfo(name, shape, type_id, type_name, offset, n_elements, n_bytes, shard)
        )

    data_offset = -(-cur.pos // alignment) * alignment
    if data_offset > cur.size:
        cur.fail("tensor data section starts past the end of the file", "data section", cur.pos)
    data_size = cur.size - data_offset
    for t in tensors:
        if t.offset % alignment:
            cur.fail(
                f"tensor {t.name!r} offset {t.offset} is not aligned to {alignment}",
                "tensor offset",
                data_offset + t.offset,
            )
        end = t.offset + (t.n_bytes or 0)
        if t.offset > data_size or end > data_size:
            cur.fail(
                f"tensor {t.name!r} data [{t.offset}, {end}) extends past the end of the "
                f"{data_size}-byte data section (truncated?)",
                "tensor data",
                data_offset + t.offset,
            )
    return GGUFHeader(
        [path], version, kv_count, metadata, tensors, alignment, [data_offset], kv_digests
    )


# ArchitectureFacts field -> GGUF key under {general.architecture}, as llama.cpp reads them for
# multi-head latent attention (models/deepseek2.cpp: n_lora_kv, n_embd_head_k_mla_impl,
# n_embd_head_v_mla_impl; n_rot from rope.dimension_count).
LATENT_ATTENTION_KEYS = {
    "kv_lora_rank": "attention.kv_lora_rank",
    "rope_dimension_count": "rope.dimension_count",
    "key_length_mla": "attention.key_length_mla",
    "value_length_mla": "attention.value_length_mla",
}


def latent_attention_facts(header: GGUFHeader) -> dict[str, int | None]:
    """The ``ArchitectureFacts`` fields of multi-head latent attention in ``header`` (None where
    a key is absent or not an integer): ``ArchitectureFacts(..., **latent_attention_facts(h))``.
    """
    facts: dict[str, int | None] = {}
    for field_name, suffix in LATENT_ATTENTION_KEYS.items():
        value = header.arch_key(suffix)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            value = None
        elif value == 0 and field_name != "rope_dimension_count":
            value = None  # llama.cpp's default: not latent attention
        facts[field_name] = value
    if facts["kv_lora_rank"] is None:
        # Only latent attention needs the rope dims: every other file keeps the manifest (and
        # the record identity) it had before this fact was read.
        facts["rope_dimension_count"] = None
    return facts


def split_paths(path: Path) -> list[Path]:
    """All shard paths of the split set ``path`` belongs to, or ``[path]``."""
    match = SPLIT_RE.match(path.name)
    if not match:
        return [path]
    count = int(match.group("count"))
    if count < 1:
        raise InvalidArtifact(path, "split count 0 in file name")
    stem = match.group("stem")
    return [path.with_name(f"{stem}-{i:05d}-of-{count:05d}.gguf") for i in range(1, count + 1)]


def read_gguf(path: Path) -> GGUFHeader:
    """Read the header of ``path``; a shard of a split set reads the whole set as one artifact."""
    shards = split_paths(path)
    if len(shards) == 1:
        return _read_shard(path, 0)
    for shard_path in shards:
        if not shard_path.exists():
            raise InvalidArtifact(shard_path, f"shard of split set {path.name} is missing")
    headers = [_read_shard(p, i) for i, p in enumerate(shards)]
    first = headers[0]
    for i, header in enumerate(headers):
        no, count = header.get("split.no"), header.get("split.count")
        if no != i or count != len(shards):
            raise InvalidArtifact(
                header.paths[0],
                f"split.no={no!r} split.count={count!r}, expected {i} and {len(shards)}",
                field="split metadata",
            )
    tensors = [t for h in headers for t in h.tensors]
    names = [t.name for t in tensors]
    if len(set(names)) != len(names):
        raise InvalidArtifact(path, "a tensor name appears in more than one shard")
    declared = first.get("split.tensors.count")
    if declared is not None and declared != len(tensors):
        raise InvalidArtifact(
            path, f"split.tensors.count={declared} but the shards hold {len(tensors)} tensors"
        )
    return GGUFHeader(
        shards,
        first.version,
        first.kv_count,
        first.metadata,
        tensors,
        first.alignment,
        [h.data_offsets[0] for h in headers],
        first.kv_digests,
    )
