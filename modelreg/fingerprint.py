"""Runtime fingerprints: what a verification's evidence was produced with.

Evidence expires with its runtime: a record verified under one llama.cpp build is not known to
work under the next. The fingerprint is cheap to compute (package metadata and a digest of the
compiled libraries, no runtime import), so ``show`` and ``list`` can tell stale evidence.

- On the host that is the target: the runtime's package versions, a digest of the compiled
  llama.cpp libraries (a rebuild with other CPU flags changes it), and the host's CPU flags.
- Elsewhere: the target's declared CPU flags.
- Always: the ``runtime:`` entries a target declares in targets.yaml (e.g. the llama.cpp build
  or Neuron SDK its fleet runs), since a remote host's runtime cannot be probed from here.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from modelreg import host

if TYPE_CHECKING:
    from modelreg.targets import Target

Fingerprint = dict[str, str]

_PACKAGES = {
    "llama.cpp": ("llama-cpp-python",),
    "transformers": ("transformers", "torch"),
    "neuron": (
        "neuronx-cc",
        "torch-neuronx",
        "neuronx-distributed",
        "neuronx-distributed-inference",
    ),
}
_LLAMA_LIBS = ("libllama.so", "libggml-cpu.so", "libggml-base.so", "libggml.so")
_VERSIONS: dict[tuple[object, ...], str] = {}
_LIBRARY_DIGESTS: dict[tuple[tuple[str, int, int, int], ...], str] = {}


def _version(package: str) -> str:
    # importlib.metadata scans every sys.path entry (~1 ms). Installing, upgrading or removing
    # a package adds or removes a dist-info directory, which changes the mtime of its
    # sys.path entry: the answer is reused only while no entry has changed.
    key = (package, *(_mtime(entry) for entry in sys.path))
    if key not in _VERSIONS:
        if len(_VERSIONS) > 64:
            _VERSIONS.clear()
        try:
            _VERSIONS[key] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            _VERSIONS[key] = "not installed"
    return _VERSIONS[key]


def _mtime(entry: str) -> int:
    try:
        return os.stat(entry or ".").st_mtime_ns
    except OSError:
        return -1


def _digest(parts: list[bytes]) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(hashlib.sha256(part).digest())
    return "sha256:" + h.hexdigest()[:16]


def llama_build_digest() -> str:
    """Digest of the compiled llama.cpp libraries bundled with llama-cpp-python."""
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or not spec.submodule_search_locations:
        return "not installed"
    lib = Path(next(iter(spec.submodule_search_locations))) / "lib"
    found = [lib / name for name in _LLAMA_LIBS if (lib / name).is_file()]
    if not found:
        return "not found"
    # Hashing the libraries takes ~8 ms; a long-lived server asks on every status request.
    # Keyed by each file's identity and modification, so a reinstall or rebuild (a new file,
    # a new mtime or size) is seen at once: evidence still expires with its runtime.
    key = tuple((str(p), s.st_ino, s.st_size, s.st_mtime_ns) for p in found for s in [p.stat()])
    if key not in _LIBRARY_DIGESTS:
        _LIBRARY_DIGESTS.clear()
        _LIBRARY_DIGESTS[key] = _digest([p.read_bytes() for p in found])
    return _LIBRARY_DIGESTS[key]


def flags_digest(flags: frozenset[str]) -> str:
    return _digest([" ".join(sorted(flags)).encode()])


def runtime_fingerprint(target: Target, runtime: str) -> Fingerprint:
    """The fingerprint evidence for ``runtime`` on ``target`` would carry if produced now."""
    fingerprint: Fingerprint = {}
    if target.is_local:
        for package in _PACKAGES.get(runtime, ()):
            fingerprint[package] = _version(package)
        if runtime == "llama.cpp":
            fingerprint["llama.cpp build"] = llama_build_digest()
        if target.kind == "cpu":
            fingerprint["cpu flags"] = flags_digest(host.cpu_flags())
    elif target.cpu_flags is not None:
        fingerprint["cpu flags"] = flags_digest(target.cpu_flags)
    fingerprint |= {f"declared {k}": v for k, v in target.runtime.items()}
    return fingerprint


def describe_change(old: Fingerprint, new: Fingerprint) -> str:
    """``llama-cpp-python 0.3.36 → 0.3.37, declared llama.cpp b6000 → b6001``."""
    if not old:
        return "evidence predates runtime fingerprints"
    changes = [
        f"{key} {old.get(key, 'none')} → {new.get(key, 'none')}"
        for key in sorted(old.keys() | new.keys())
        if old.get(key) != new.get(key)
    ]
    return ", ".join(changes)
