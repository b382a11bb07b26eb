"""GGUF header read: modelreg's reader vs gguf.GGUFReader on Gemma 3 270M (262k-token vocab).

Both must produce the same metadata and tensor table; the benchmark asserts it.
"""

from __future__ import annotations

from typing import Any

from benchmarks.common import WORK, best_of
from modelreg.bundled import gemma3_270m_gguf
from modelreg.manifests.gguf import SkippedArray, read_gguf


def _theirs(path: Any) -> tuple[dict[str, Any], list[tuple[Any, ...]]]:
    from gguf import GGUFReader, GGUFValueType

    reader = GGUFReader(path)
    meta: dict[str, Any] = {}
    for field in reader.fields.values():
        if field.name.startswith("GGUF."):
            continue
        kind = field.types[0]
        if kind == GGUFValueType.ARRAY:
            meta[field.name] = ("array", len(field.data))
        elif kind == GGUFValueType.STRING:
            meta[field.name] = bytes(field.parts[field.data[0]]).decode("utf-8", "replace")
        else:
            meta[field.name] = field.parts[field.data[0]].tolist()[0]
    # GGUFReader reports absolute data offsets (file position of each tensor's data).
    tensors = [
        (t.name, tuple(int(d) for d in t.shape), int(t.tensor_type), int(t.data_offset))
        for t in reader.tensors
    ]
    return meta, tensors


def _ours(path: Any) -> tuple[dict[str, Any], list[tuple[Any, ...]]]:
    header = read_gguf(path)
    meta = {}
    for key, value in header.metadata.items():
        if isinstance(value, SkippedArray):
            meta[key] = ("array", value.length)
        elif isinstance(value, list):
            meta[key] = ("array", len(value))
        else:
            meta[key] = value
    start = header.data_offsets[0]  # ours are relative to the data section
    tensors = [(t.name, t.shape, t.type_id, t.offset + start) for t in header.tensors]
    return meta, tensors


def run() -> dict[str, Any]:
    path = gemma3_270m_gguf(WORK.parent.parent / ".cache" / "models")
    theirs_meta, theirs_tensors = _theirs(path)
    ours_meta, ours_tensors = _ours(path)
    assert ours_meta.keys() == theirs_meta.keys(), ours_meta.keys() ^ theirs_meta.keys()
    for key in ours_meta:
        a, b = ours_meta[key], theirs_meta[key]
        assert a == b or (isinstance(a, float) and abs(a - b) < 1e-6), (key, a, b)
    assert ours_tensors == theirs_tensors, "tensor tables differ"

    ours = best_of(lambda: read_gguf(path), 5)
    from gguf import GGUFReader

    theirs = best_of(lambda: GGUFReader(path), 1)
    return {
        "name": "GGUF header read, Gemma 3 270M (236 tensors, 262,144-token vocab)",
        "ours_s": ours,
        "theirs_s": theirs,
        "ratio": theirs / ours,
        "detail": f"modelreg {ours * 1000:.1f} ms vs gguf.GGUFReader {theirs:.2f} s; "
        f"same {len(ours_meta)} metadata keys and {len(ours_tensors)} tensors",
        "target": "≥ 100× faster",
        "met": theirs / ours >= 100,
    }


if __name__ == "__main__":
    print(run())
