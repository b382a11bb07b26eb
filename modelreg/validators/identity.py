"""Identity binding: is the model a server answers with the record's model?

A server's answers are only evidence for the record if the server serves the record's bytes.
What the server says about its model is read from ``/props`` (llama-server, ik_llama.cpp:
``model_path``), ``/v1/models`` (ids; llama-server's ``meta.size``) and the ``model`` field of
its answers:

1. A named model **file readable here**: its sha256 must be the sha256 of a file of the record.
   The file verify handed to the runtime (the same file, by device and inode) is bound by the
   digest check of the same run, and not hashed twice.
2. Otherwise **name and size**: a name (a file's base name, or the record's model id) and a
   size (a file's bytes, or llama-server's tensor bytes) must both match the record.
3. Anything less is ``unconfirmed``: the run says so, and it blocks unless the target sets
   ``require_identity: false``. A named file with other bytes or a reported size that fits no
   file of the record is a ``mismatch``, which always fails, naming both sides.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from modelreg.errors import InvalidArtifact
from modelreg.manifests.digest import sha256_file
from modelreg.registry.store import Record

WEIGHT_SUFFIXES = (".gguf", ".safetensors", ".bin", ".pt", ".pth", ".neff", ".onnx")


@dataclass
class ServedModel:
    """What a server said about the model it serves."""

    model_ids: list[str] = field(default_factory=list)  # /v1/models
    answered_as: list[str] = field(default_factory=list)  # "model" of its completions
    model_path: str | None = None  # /props
    sizes: list[int] = field(default_factory=list)  # /v1/models meta.size (tensor bytes)
    n_params: list[int] = field(default_factory=list)

    def names(self) -> list[str]:
        """Every name it gave, the model path and what answered first."""
        ordered = [self.model_path] if self.model_path else []
        ordered += self.answered_as + self.model_ids
        return list(dict.fromkeys(n for n in ordered if n))


@dataclass(frozen=True)
class IdentityVerdict:
    status: Literal["confirmed", "mismatch", "unconfirmed"]
    message: str
    evidence: dict[str, Any]
    how: str = ""  # for a confirmed identity, in a few words: "by file sha256", …


def looks_like_file(name: str) -> bool:
    """Whether a served model name names a file (an absolute or relative path, or a weights
    file name) rather than an alias or a hub id."""
    return name.startswith(("/", "./", "../", "~")) or name.lower().endswith(WEIGHT_SUFFIXES)


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _tensor_bytes(record: Record) -> int | None:
    quantization = record.manifest.quantization
    if quantization is None or not quantization.tensor_types:
        return None
    sizes = [stats.bytes for stats in quantization.tensor_types.values()]
    if any(size is None for size in sizes):
        return None
    return sum(size for size in sizes if size is not None)


def _short(sha: str | None) -> str:
    return f"sha256:{sha[:16]}…" if sha else "sha256 unknown"


def bind_identity(
    record: Record, files: dict[str, Path], served: ServedModel, *, remote: bool
) -> IdentityVerdict:
    """Decide whether ``served`` is the record's model (see the module docstring).

    ``files`` maps the record's manifest paths to where they are on this host (what the digest
    check hashes). ``remote``: the server is not on this host, so a path it names that happens
    to exist here is another machine's file and proves nothing.
    """
    entries = {f.path: f for f in record.manifest.files}
    record_files = ", ".join(f"{f.path} {_short(f.sha256)}" for f in entries.values())
    evidence: dict[str, Any] = {
        "served_names": served.names(),
        "served_sizes": served.sizes,
        "record_files": [
            {"path": f.path, "bytes": f.bytes, "sha256": f.sha256} for f in entries.values()
        ],
    }
    if served.n_params:
        evidence["served_n_params"] = served.n_params
    named_files = [n for n in served.names() if looks_like_file(n)]
    confirmed_by_file: list[str] = []
    for name in named_files if not remote else []:
        path = Path(name).expanduser()
        if not path.is_file() or not os.access(path, os.R_OK):
            continue
        handed = next((p for p, local in files.items() if _same_file(path, local)), None)
        if handed is not None:
            confirmed_by_file.append(
                f"the server names {name}, the record's file {handed} verify gave it "
                f"({_short(entries[handed].sha256)}, hashed by the digest check)"
            )
            evidence.setdefault("files", []).append({"named": name, "record_file": handed})
            continue
        try:
            sha = sha256_file(path)
        except InvalidArtifact:  # gone or unreadable since: it confirms nothing
            continue
        match = next((f for f in entries.values() if f.sha256 == sha), None)
        evidence.setdefault("files", []).append(
            {"named": name, "sha256": sha, "record_file": match.path if match else None}
        )
        if match is None:
            return IdentityVerdict(
                "mismatch",
                f"the server serves {name} (sha256:{sha}), which is not a file of record "
                f"{record.id} ({record_files})",
                evidence,
            )
        confirmed_by_file.append(f"the server names {name}, sha256 equal to {match.path}")
    if confirmed_by_file:
        how = "by the file it serves" if len(confirmed_by_file) == 1 else "by the files it serves"
        return IdentityVerdict("confirmed", "; ".join(confirmed_by_file), evidence, how)

    sizes = {f.bytes for f in entries.values() if f.bytes is not None}
    tensor_bytes = _tensor_bytes(record)
    if tensor_bytes is not None:
        sizes.add(tensor_bytes)
    size_match = [s for s in served.sizes if s in sizes]
    wrong_size = [s for s in served.sizes if s not in sizes]
    if wrong_size and not size_match:
        return IdentityVerdict(
            "mismatch",
            f"the server's model ({', '.join(served.names()) or 'unnamed'}) is {wrong_size[0]} "
            f"bytes; record {record.id} has {sorted(sizes)} ({record_files})",
            evidence,
        )
    basenames = {PurePosixPath(p).name for p in entries}
    name_match = [
        n
        for n in served.names()
        if PurePosixPath(n).name in basenames or n.casefold() == record.model_id.casefold()
    ]
    if name_match and size_match:
        return IdentityVerdict(
            "confirmed",
            f"name {name_match[0]!r} and size {size_match[0]} bytes match record {record.id}",
            evidence,
            "by name and size",
        )
    seen = ", ".join(repr(n) for n in served.names()) or "no model name"
    missing = []
    if not name_match:
        missing.append(
            f"no name it gives is a file name of the record or its model id {record.model_id!r}"
        )
    if not size_match:
        missing.append("it reports no size" if not served.sizes else "no size matches")
    where = (
        " (readable files it names are not looked at: the server is remote)"
        if (remote and named_files)
        else ""
    )
    return IdentityVerdict(
        "unconfirmed",
        f"cannot tell whether the server serves record {record.id}: it says {seen}; "
        + "; ".join(missing)
        + where,
        evidence,
    )


def model_ids(document: Any) -> tuple[list[str], list[int], list[int]]:
    """(ids, meta sizes, meta n_params) from a ``/v1/models`` answer."""
    ids: list[str] = []
    sizes: list[int] = []
    params: list[int] = []
    data = document.get("data") if isinstance(document, dict) else None
    for item in data if isinstance(data, list) else []:
        if not isinstance(item, dict):
            continue
        if isinstance(item.get("id"), str):
            ids.append(item["id"][:1000])
        meta = item.get("meta")
        if isinstance(meta, dict):
            size, n_params = meta.get("size"), meta.get("n_params")
            if isinstance(size, int) and not isinstance(size, bool) and size > 0:
                sizes.append(size)
            if isinstance(n_params, int) and not isinstance(n_params, bool) and n_params > 0:
                params.append(n_params)
    return ids, sizes, params


def first_strings(values: Iterable[Any]) -> list[str]:
    return list(dict.fromkeys(v[:1000] for v in values if isinstance(v, str) and v))
