"""Fingerprints: everything a verification's evidence was produced under.

Evidence expires with what produced it: a record verified under one llama.cpp build, one set of
shared libraries, one definition of the target or one golden suite is not known to work under
the next. A fingerprint is a flat ``{name: value}`` map, stored with every run and recomputed
whenever deployability is decided; any difference makes the evidence stale, with a reason
that names what changed ("libggml-cpu.so changed", "target 'prod' changed: memory_gib 64 →
0.05", "suite changed").

- On the host that is the target: the runtime's package versions, a digest of the compiled
  llama.cpp libraries, the host's CPU flags, and the digest of every shared object of the
  inference runtime the child mapped (``lib <path>``, read from the child after the model
  loaded; ``is_inference_library`` says which: llama.cpp's, torch's, OpenMP/BLAS, the Neuron
  SDK's — not markupsafe's ``_speedups.so`` or ``libsqlite3``).
- Elsewhere: the target's declared CPU flags (a remote host's libraries cannot be hashed
  from here; the evidence still names them, for audit).
- Always: the target's effective definition (``target <field>``: kind, memory, CPU flags,
  hosts, golden prompts, trusted keys, Neuron cores, swap, …), the ``runtime:`` entries it
  declares, and the golden suite in force (``suite``).

Library digests are cached by (path, device, inode, size, mtime, ctime), in memory and in
``$MODELREG_HOME/library-digests.json``: a library that changes in any way gets a new entry.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from modelreg import host
from modelreg.deployed_unit import deployed_unit

if TYPE_CHECKING:
    from modelreg.targets import Target, TrustedKey

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
LIB_PREFIX = "lib "
TARGET_PREFIX = "target "
UNIT_PREFIX = "unit "
GiB = 1 << 30
_VERSIONS: dict[tuple[object, ...], str] = {}


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


def package_version(package: str) -> str:
    """An installed package's version ("not installed" when it is not)."""
    return _version(package)


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
    lib = _llama_lib_dir()
    return "not installed" if lib is None else libraries_digest(lib)


def libraries_digest(lib: Path) -> str:
    """One digest over every llama.cpp library in ``lib`` (name and content digest of each:
    a rebuilt ``libggml-cpu.so`` changes it as much as a rebuilt ``libllama.so``)."""
    found = [lib / name for name in _LLAMA_LIBS if (lib / name).is_file()]
    if not found:
        return "not found"
    return _digest([f"{p.name}={library_digest(p)}".encode() for p in found])


def flags_digest(flags: frozenset[str]) -> str:
    return _digest([" ".join(sorted(flags)).encode()])


# -- shared-library digests, cached by file identity ---------------------------------------

_memo: dict[str, str] = {}
_persistent: dict[str, str] | None = None


def _cache_path() -> Path:
    from modelreg import config

    return config.home() / "library-digests.json"


def _load_persistent() -> dict[str, str]:
    global _persistent
    if _persistent is None:
        try:
            data = json.loads(_cache_path().read_text(encoding="utf-8"))
            _persistent = (
                {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}
            )
        except (OSError, ValueError):
            _persistent = {}
    return _persistent


def _save_persistent(cache: dict[str, str]) -> None:
    path = _cache_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(cache, fh)
        os.replace(tmp, path)
    except OSError:
        pass  # a cache that cannot be written is only slower


def library_digest(path: Path | str) -> str:
    """sha256 (16 hex) of a shared object, or "missing"; cached by its identity."""
    try:
        st = os.stat(path)
    except OSError:
        return "missing"
    key = f"{path}|{st.st_dev}|{st.st_ino}|{st.st_size}|{st.st_mtime_ns}|{st.st_ctime_ns}"
    if key in _memo:
        return _memo[key]
    persistent = _load_persistent()
    digest = persistent.get(key)
    if digest is None:
        h = hashlib.sha256()
        try:
            with open(path, "rb") as fh:
                while chunk := fh.read(1 << 20):
                    h.update(chunk)
        except OSError:
            return "unreadable"
        digest = h.hexdigest()[:16]
        persistent[key] = digest
        _save_persistent(persistent)
    _memo[key] = digest
    return digest


# -- which shared objects are the inference runtime ---------------------------------------
# A runtime child maps ~100 shared objects; only these can change what a model answers. The
# rest (markupsafe's _speedups, libsqlite3, libcrypto, libssl, libz, libc, the interpreter's
# own extension modules) are kept in the run's evidence (``mapped_libraries``) and never
# expire it. A library a runtime depends on for its arithmetic belongs here: when in doubt,
# add it (a needless re-verify costs minutes; a missed change costs an incident).
INFERENCE_LIBRARY_PREFIXES = (
    # llama.cpp
    "libllama",
    "libggml",
    "libmtmd",
    "libllava",
    # torch
    "libtorch",
    "libc10",
    "libshm",
    # OpenMP and BLAS: the kernels' threading and matrix products
    "libgomp",
    "libiomp",
    "libomp",
    "libopenblas",
    "libscipy_openblas",
    "libblas",
    "libcblas",
    "liblapack",
    "libmkl",
    # the Neuron SDK's runtime, collectives and compiler
    "libnrt",
    "libnccom",
    "libneuron",
    "libtorchneuron",
    "libncfw",
    # GPU runtimes and their math libraries (CUDA, ROCm), should a runtime map them
    "libcuda",
    "libcublas",
    "libcudnn",
    "libcufft",
    "libcurand",
    "libcusparse",
    "libcusolver",
    "libnccl",
    "libnvrtc",
    "libnvjitlink",
    "librocblas",
    "libhipblas",
    "libamdhip",
    "libmiopen",
    "librccl",
    # the C math and C++ runtimes the kernels call (expf, the C++ standard library)
    "libm.so",
    "libm-",
    "libmvec",
    "libstdc++",
    "libgcc_s",
)
# Extension modules inside these packages are the runtime too (torch's _C, the tokenizer).
INFERENCE_PACKAGE_DIRS = (
    "/llama_cpp/",
    "/torch/",
    "/tokenizers/",
    "/torch_neuronx/",
    "/neuronxcc/",
    "/libneuronxla/",
    "/neuronx_distributed/",
    "/opt/aws/neuron/",
    "/nvidia/",
    "/sentencepiece/",
    "/tiktoken/",
    "/safetensors/",
)


def is_inference_library(path: str) -> bool:
    """Can this shared object change what a model answers? (see the lists above)"""
    name = path.rsplit("/", 1)[-1].lower()
    return name.startswith(INFERENCE_LIBRARY_PREFIXES) or any(
        d in path for d in INFERENCE_PACKAGE_DIRS
    )


def inference_view(fingerprint: Fingerprint) -> Fingerprint:
    """The fingerprint without the shared objects that cannot change an answer: what
    staleness compares (a rebuilt libggml-cpu.so expires evidence, a changed _speedups.so
    does not). Evidence stored before this rule named every mapped object; it is judged by
    the same view."""
    if not any(k.startswith(LIB_PREFIX) for k in fingerprint):
        return fingerprint
    return {
        k: v
        for k, v in fingerprint.items()
        if not k.startswith(LIB_PREFIX) or is_inference_library(k.removeprefix(LIB_PREFIX))
    }


def summary(fingerprint: Fingerprint, unchanged: bool | None = None) -> str:
    """The runtime in one line: "llama-cpp-python 0.3.36, llama.cpp sha256:…, 53 libraries,
    unchanged since verify" (the full map: ``show --runtime`` / ``--json``)."""
    if not fingerprint:
        return "no runtime recorded"
    parts = [
        f"{k} {fingerprint[k]}"
        for k in ("llama-cpp-python", "transformers", "torch", "torch-neuronx", "neuronx-cc")
        if k in fingerprint and fingerprint[k] != "not installed"
    ]
    if "llama.cpp build" in fingerprint:
        parts.append(f"llama.cpp {fingerprint['llama.cpp build']}")
    declared = [
        f"{k.removeprefix('declared ')} {v}"
        for k, v in fingerprint.items()
        if k.startswith("declared ")
    ]
    parts += [f"declared {d}" for d in sorted(declared)]
    libraries = [k for k in fingerprint if k.startswith(LIB_PREFIX)]
    if libraries:
        parts.append(f"{len(libraries)} libraries")
    if unchanged is not None:
        parts.append("unchanged since verify" if unchanged else "CHANGED since verify")
    return ", ".join(parts) or "no runtime recorded"


def libraries_of(fingerprint: Fingerprint) -> tuple[str, ...]:
    """The shared objects a stored fingerprint names (what its runtime child mapped)."""
    return tuple(
        sorted(k.removeprefix(LIB_PREFIX) for k in fingerprint if k.startswith(LIB_PREFIX))
    )


# -- the target's definition ---------------------------------------------------------------


def _keys_digest(keys: Iterable[TrustedKey]) -> str:
    """One digest over the keys a target trusts, as stored with its definition (a key stored
    by name only counts as that name: it verifies nothing)."""
    parts = [key.pem.encode() if key.pem else f"unstored:{key.label}".encode() for key in keys]
    return _digest(parts) if parts else "none"


def target_definition(target: Target) -> Fingerprint:
    """The target's effective definition, field by field: evidence gathered under another
    definition (other memory, CPU flags, prompts, hosts, trusted keys…) is stale."""
    definition = {
        "kind": target.kind,
        "memory_gib": f"{target.memory_bytes / GiB:g}" if target.memory_bytes else "unknown",
        "cpu_flags": flags_digest(target.cpu_flags) if target.cpu_flags is not None else "none",
        "hosts": ",".join(target.hosts) or "none",
        "golden_prompts": _digest(
            [json.dumps([p.model_dump() for p in target.golden_prompts], sort_keys=True).encode()]
        )
        if target.golden_prompts
        else "none",
        "neuron_cores": str(target.neuron_cores),
        "swap_gib": f"{target.swap_bytes / GiB:g}" if target.swap_bytes else "0",
        "trust_artifact_keys": _keys_digest(target.trust_artifact_keys),
        "trust_verifier_keys": _keys_digest(target.trust_verifier_keys),
        "suite": _suite_definition(target),
    }
    if target.serving is not None and target.serving.declared:
        # Only when a serving block declares it: evidence from before serving existed stays as
        # fresh as it was (what a launch's flags say is in the deployed unit's fingerprint).
        serving = target.serving
        definition["serving"] = (
            f"context={serving.context or 'trained'} parallel={serving.parallel} "
            f"kv={serving.kv_dtype} unified={serving.unified} "
            f"max_output={serving.max_output_tokens or 'none'}"
        )
    if target.gates is not None:
        # Only when declared, like serving: a gate added later expires the evidence it judged.
        definition["gates"] = " ".join(
            f"{name}={value:g}"
            for name, value in sorted(target.gates.model_dump(exclude_none=True).items())
        )
    # Only when declared, like gates: a definition without them fingerprints as before.
    if target.cost_per_hour_usd is not None:
        definition["cost_per_hour_usd"] = f"{target.cost_per_hour_usd:g}"
    if target.power_watts is not None:
        definition["power_watts"] = f"{target.power_watts:g}"
    if target.reference is not None:
        # A reference named later requires a comparison the evidence before it did not make.
        definition["reference"] = target.reference
    return {f"{TARGET_PREFIX}{k}": v for k, v in definition.items()}


def _suite_definition(target: Target) -> str:
    """The target's suite as its definition names it: a built-in name, or the stored suite's
    digest (the path it was applied from is a label, not a fact)."""
    if target.suite is None:
        return "none"
    if target.suite_json is None:
        return target.suite
    return _digest([target.suite_json.encode()])


def definition_fingerprint(target: Target, *, suite: str | None = None) -> Fingerprint:
    """What a run's evidence was produced under that the registry defines — the target's
    definition, the runtime it declares, the deployed unit, the suite in force — the same
    for every reader of the same registry (a host's view of the target — ``for_host`` —
    counts as the definition it came from)."""
    target = target.defined
    fingerprint: Fingerprint = {f"declared {k}": v for k, v in target.runtime.items()}
    fingerprint |= target_definition(target)
    # The deployed unit — image digest, launch command and flags, endpoint — is part of what
    # was verified: a new image or another flag makes the evidence stale.
    fingerprint |= {f"{UNIT_PREFIX}{k}": v for k, v in deployed_unit(target).items()}
    fingerprint["suite"] = suite or "none"
    return fingerprint


def observed_runtime(target: Target, runtime: str, *, libraries: Iterable[str] = ()) -> Fingerprint:
    """What this host runs for ``runtime``: package versions, the llama.cpp build's library
    digests, the CPU flags (a CPU target), and the digest of every shared object in
    ``libraries`` that is here (the ones the runtime child mapped). Host facts: they enter a
    verdict only as recorded evidence (a run, a host report)."""
    fingerprint: Fingerprint = {}
    for package in _PACKAGES.get(runtime, ()):
        fingerprint[package] = _version(package)
    if runtime == "llama.cpp":
        fingerprint["llama.cpp build"] = llama_build_digest()
    if target.kind == "cpu":
        fingerprint["cpu flags"] = flags_digest(host.cpu_flags())
    for library in sorted(set(libraries)):
        digest = library_digest(library)
        if digest != "missing":
            fingerprint[f"{LIB_PREFIX}{library}"] = digest
    return fingerprint


def runtime_installed(runtime: str, observed: Fingerprint) -> bool:
    """Whether ``observed`` (``observed_runtime``) says every package of ``runtime`` is here."""
    packages = _PACKAGES.get(runtime, ())
    return bool(packages) and all(
        observed.get(p, "not installed") != "not installed" for p in packages
    )


def runtime_fingerprint(
    target: Target,
    runtime: str,
    *,
    libraries: Iterable[str] = (),
    suite: str | None = None,
) -> Fingerprint:
    """The fingerprint of evidence a verify on this host produces for ``runtime`` on
    ``target``: what the host runs (``observed_runtime``; only when it is one of the target's
    hosts — ``targets.for_host``) and what the registry defines (``definition_fingerprint``)."""
    observed = observed_runtime(target, runtime, libraries=libraries) if target.is_local else {}
    return observed | definition_fingerprint(target, suite=suite)


def is_runtime_key(key: str) -> bool:
    """Whether a fingerprint key is a host fact (a package, the build, CPU flags, a library)
    rather than one of the registry's definitions."""
    return not key.startswith((TARGET_PREFIX, UNIT_PREFIX, "declared ")) and key != "suite"


def runtime_part(fingerprint: Fingerprint) -> Fingerprint:
    """The host facts of a fingerprint (``is_runtime_key``)."""
    return {k: v for k, v in fingerprint.items() if is_runtime_key(k)}


def as_reported(evidence: Fingerprint, report: Fingerprint) -> Fingerprint:
    """The runtime a host report says the target runs, in the shape of ``evidence``'s: every
    package, build and flag as reported, each library the evidence names as reported where the
    report hashed it (one it did not hash is not known to have changed)."""
    current = {k: v for k, v in report.items() if not k.startswith(LIB_PREFIX)}
    for key, value in evidence.items():
        if key.startswith(LIB_PREFIX):
            current[key] = report.get(key, value)
    return current


_LLAMA_LIB_DIRS: dict[tuple[int, ...], Path | None] = {}


def _llama_lib_dir() -> Path | None:
    key = tuple(_mtime(entry) for entry in sys.path)
    if key not in _LLAMA_LIB_DIRS:
        spec = importlib.util.find_spec("llama_cpp")
        found = None
        if spec is not None and spec.submodule_search_locations:
            found = Path(next(iter(spec.submodule_search_locations))) / "lib"
        _LLAMA_LIB_DIRS.clear()
        _LLAMA_LIB_DIRS[key] = found
    return _LLAMA_LIB_DIRS[key]


def describe_change(old: Fingerprint, new: Fingerprint, target: str | None = None) -> str:
    """What changed between two fingerprints, in words: ``runtime changed (llama-cpp-python
    0.3.36 → 0.3.37)``, ``target 'prod' changed: memory_gib 64 → 0.05``, ``suite changed``."""
    if not old:
        return "runtime changed (evidence predates runtime fingerprints)"
    keys = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
    unit_keys = [k for k in keys if k.startswith(UNIT_PREFIX)]
    target_keys = [k for k in keys if k.startswith(TARGET_PREFIX)]
    runtime = [k for k in keys if k not in unit_keys and k not in target_keys and k != "suite"]
    parts = []
    if runtime:
        changes = []
        for key in runtime:
            if key.startswith(LIB_PREFIX):
                name = Path(key.removeprefix(LIB_PREFIX)).name
                if key not in new:
                    changes.append(f"{name} no longer mapped")
                elif key not in old:
                    changes.append(f"{name} newly mapped")
                else:
                    changes.append(f"{name} changed")
            else:
                changes.append(f"{key} {old.get(key, 'none')} → {new.get(key, 'none')}")
        parts.append(f"runtime changed ({', '.join(changes)})")
    if target_keys:
        name = f"target {target!r}" if target else "target"
        if not any(k.startswith(TARGET_PREFIX) for k in old):
            parts.append(f"{name} definition not recorded with this evidence (it predates it)")
        else:
            fields = ", ".join(
                f"{k.removeprefix(TARGET_PREFIX)} {old.get(k, 'none')} → {new.get(k, 'none')}"
                for k in target_keys
            )
            parts.append(f"{name} changed: {fields}")
    if unit_keys:
        fields = ", ".join(
            f"{k.removeprefix(UNIT_PREFIX)} {old.get(k, 'none')} → {new.get(k, 'none')}"
            for k in unit_keys
        )
        parts.append(f"deployed unit changed: {fields}")
    if "suite" in keys:

        def suite(value: str | None) -> str:
            return "the golden prompts" if value in (None, "none") else str(value)

        parts.append(
            f"suite changed: the run used {suite(old.get('suite'))}, the suite in force is "
            f"{suite(new.get('suite'))}"
        )
    return "; ".join(parts)
