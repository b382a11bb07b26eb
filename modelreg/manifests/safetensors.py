"""safetensors header reader: single files and sharded checkpoints, never the tensor data.

A file is a u64 little-endian header length, a JSON header (dtype, shape, data_offsets per
tensor, optional ``__metadata__``), then the data. No torch is needed and nothing but the
header is read, so the cost does not grow with the size of the weights.
"""

from __future__ import annotations

import itertools
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from modelreg.errors import InvalidArtifact
from modelreg.jsonio import parse_json, read_json_file

INDEX_NAME = "model.safetensors.index.json"
MAX_HEADER_BYTES = 100 << 20  # the reference implementation's own limit
MAX_INDEX_BYTES = 50 << 20
# A header is {name: {dtype, shape: [..], data_offsets: [..]}, __metadata__: {..}}: 3 levels.
MAX_HEADER_DEPTH = 8
# Bytes per element; F4 and other packed types are absent: their sizes are not checked.
DTYPE_BYTES = {
    "F64": 8,
    "I64": 8,
    "U64": 8,
    "F32": 4,
    "I32": 4,
    "U32": 4,
    "F16": 2,
    "BF16": 2,
    "I16": 2,
    "U16": 2,
    "I8": 1,
    "U8": 1,
    "BOOL": 1,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "F8_E8M0": 1,
}


@dataclass(frozen=True)
class SafetensorsTensor:
    name: str
    dtype: str
    shape: tuple[int, ...]
    start: int  # relative to the data section
    end: int
    file: str

    @property
    def n_elements(self) -> int:
        n = 1
        for dim in self.shape:
            n *= dim
        return n

    @property
    def n_bytes(self) -> int:
        return self.end - self.start


@dataclass
class SafetensorsCheckpoint:
    """All tensors of a checkpoint (one file, or every shard named by the index)."""

    files: list[Path]
    tensors: list[SafetensorsTensor]
    metadata: dict[str, str] = field(default_factory=dict)
    index: Path | None = None


def read_header(path: Path) -> tuple[list[SafetensorsTensor], dict[str, str]]:
    """Tensors and ``__metadata__`` of one safetensors file, checked against its size."""
    try:
        size = path.stat().st_size
        with path.open("rb") as fh:
            prefix = fh.read(8)
            if len(prefix) < 8:
                raise InvalidArtifact(
                    path, f"only {size} bytes: too small for safetensors", offset=0
                )
            (header_len,) = struct.unpack("<Q", prefix)
            if header_len > size - 8:
                raise InvalidArtifact(
                    path,
                    f"header length {header_len} is larger than the file ({size} bytes)",
                    offset=0,
                    field="header length",
                )
            if header_len > MAX_HEADER_BYTES:
                raise InvalidArtifact(
                    path,
                    f"header length {header_len} exceeds {MAX_HEADER_BYTES}",
                    offset=0,
                    field="header length",
                )
            raw = fh.read(header_len)
    except FileNotFoundError:
        raise InvalidArtifact(path, "file not found") from None
    except IsADirectoryError:
        raise InvalidArtifact(path, "is a directory, expected a .safetensors file") from None
    try:
        header = parse_json(raw, max_depth=MAX_HEADER_DEPTH)
    except ValueError as exc:
        raise InvalidArtifact(path, f"header is {exc}", offset=8, field="header") from None
    if not isinstance(header, dict):
        raise InvalidArtifact(path, "header is not a JSON object", offset=8, field="header")
    metadata = header.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
    ):
        raise InvalidArtifact(path, "__metadata__ must map strings to strings", field="header")
    data_size = size - 8 - header_len
    tensors = [_tensor(path, name, entry, data_size) for name, entry in header.items()]
    spans = sorted((t.start, t.end, t.name) for t in tensors if t.end > t.start)
    for (_, end_a, name_a), (start_b, _, name_b) in itertools.pairwise(spans):
        if start_b < end_a:
            raise InvalidArtifact(
                path, f"tensors {name_a!r} and {name_b!r} overlap", field="data_offsets"
            )
    return tensors, metadata


def _tensor(path: Path, name: str, entry: Any, data_size: int) -> SafetensorsTensor:
    if not isinstance(entry, dict):
        raise InvalidArtifact(path, f"tensor {name!r}: entry is not an object", field="header")
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if not isinstance(dtype, str):
        raise InvalidArtifact(path, f"tensor {name!r}: dtype missing", field="header")
    if not isinstance(shape, list) or not all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
    ):
        raise InvalidArtifact(path, f"tensor {name!r}: shape {shape!r} is invalid", field="shape")
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(isinstance(o, int) and not isinstance(o, bool) for o in offsets)
        or not 0 <= offsets[0] <= offsets[1]
    ):
        raise InvalidArtifact(
            path, f"tensor {name!r}: data_offsets {offsets!r} are invalid", field="data_offsets"
        )
    start, end = offsets
    if end > data_size:
        raise InvalidArtifact(
            path,
            f"tensor {name!r} data [{start}, {end}) extends past the end of the "
            f"{data_size}-byte data section (truncated?)",
            field="data_offsets",
        )
    tensor = SafetensorsTensor(name, dtype, tuple(shape), start, end, path.name)
    width = DTYPE_BYTES.get(dtype)
    if width is not None and tensor.n_elements * width != tensor.n_bytes:
        raise InvalidArtifact(
            path,
            f"tensor {name!r}: {tensor.n_elements} × {dtype} needs "
            f"{tensor.n_elements * width} bytes, data_offsets span {tensor.n_bytes}",
            field="data_offsets",
        )
    return tensor


def read_checkpoint(directory: Path) -> SafetensorsCheckpoint:
    """Every tensor of the checkpoint in ``directory`` (sharded via the index, or single)."""
    index_path = directory / INDEX_NAME
    if index_path.is_file():
        return _read_sharded(index_path)
    files = sorted(directory.glob("*.safetensors"))
    if not files:
        raise InvalidArtifact(directory, "no .safetensors files and no index")
    if len(files) > 1:
        raise InvalidArtifact(
            directory,
            f"{len(files)} .safetensors files but no {INDEX_NAME} to say which belong together",
        )
    tensors, metadata = read_header(files[0])
    return SafetensorsCheckpoint(files, tensors, metadata)


def _read_sharded(index_path: Path) -> SafetensorsCheckpoint:
    index = read_json_file(index_path, max_bytes=MAX_INDEX_BYTES, what="index")
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise InvalidArtifact(index_path, "index has no weight_map of tensor -> shard file")
    shard_names = sorted(set(weight_map.values()))
    for name in shard_names:
        if "/" in name or name.startswith("."):
            raise InvalidArtifact(index_path, f"shard name {name!r} points outside the checkpoint")
        if not (index_path.parent / name).is_file():
            raise InvalidArtifact(index_path, f"index names shard {name!r}, which is missing")
    tensors: list[SafetensorsTensor] = []
    metadata: dict[str, str] = {}
    seen: dict[str, str] = {}
    for name in shard_names:
        shard_tensors, shard_metadata = read_header(index_path.parent / name)
        metadata = metadata or shard_metadata
        for t in shard_tensors:
            if t.name in seen:
                raise InvalidArtifact(
                    index_path, f"tensor {t.name!r} is stored in both {seen[t.name]} and {name}"
                )
            seen[t.name] = name
            if weight_map.get(t.name) != name:
                raise InvalidArtifact(
                    index_path,
                    f"tensor {t.name!r} is in {name} but the index says {weight_map.get(t.name)!r}",
                )
        tensors += shard_tensors
    missing = sorted(set(weight_map) - set(seen))
    if missing:
        raise InvalidArtifact(
            index_path,
            f"index lists {missing[0]!r} in {weight_map[missing[0]]}, which does not "
            f"hold it ({len(missing)} missing)",
        )
    files = [index_path.parent / name for name in shard_names]
    return SafetensorsCheckpoint(files, tensors, metadata, index_path)
