"""Damaged copies of a real GGUF for the judge's broken-weights corpus: whole quantization
blocks of one tensor inverted, as a bad disk, a truncated download patched with garbage or a
buggy converter leave them. The file stays a valid GGUF that llama.cpp loads."""

from __future__ import annotations

import shutil
from pathlib import Path

import gguf
import numpy as np

from modelreg.manifests.gguf import read_gguf


def flip_blocks(
    src: Path,
    dst: Path,
    tensor_name: str,
    first: int = 0,
    count: int | None = None,
    step: int = 1,
) -> Path:
    """Copy the single-file GGUF ``src`` to ``dst`` with every bit inverted in the blocks
    ``first``, ``first + step``, … (up to ``first + count``, or the end when None) of the
    tensor ``tensor_name``.

    A block is the tensor type's quantization block (gguf.GGML_QUANT_SIZES: Q4_1 is 32
    weights in 20 bytes, scale and minimum included), so the damage is whole blocks: scales
    and weights both garbage. Offsets come from modelreg's own header reader: gguf.GGUFReader
    builds a Python object per vocabulary entry (2 s for SmolLM2, 20 s for Gemma 3).
    """
    shutil.copyfile(src, dst)
    header = read_gguf(dst)
    tensor = next((t for t in header.tensors if t.name == tensor_name), None)
    if tensor is None:
        raise KeyError(f"no tensor {tensor_name!r} in {src}")
    assert tensor.n_bytes is not None and tensor.shard == 0, (tensor.type_name, tensor.shard)
    _, block_bytes = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[tensor.type_name]]
    start = header.data_offsets[0] + tensor.offset
    data = np.memmap(dst, dtype=np.uint8, mode="r+", offset=start, shape=(tensor.n_bytes,))
    blocks = data.reshape(-1, block_bytes)
    end = len(blocks) if count is None else first + count
    if not 0 <= first < end <= len(blocks):
        raise IndexError(f"blocks {first}..{end} of {tensor_name!r}: it has {len(blocks)}")
    blocks[first:end:step] ^= 0xFF
    data.flush()
    del blocks, data
    return dst
