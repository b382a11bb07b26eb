"""Pickle scanning: every global a pickle would import, before anything unpickles it.

``torch.load``, ``torch.jit.load`` and ``pickle.load`` import whatever module attribute a
pickle names and call it: ``posix.system`` in a ``__reduce__`` runs a shell command at load.
Reading the opcodes is picklescan's job (pure Python, no dependencies, MIT, the scanner the
Hugging Face Hub runs): it lists every ``GLOBAL`` / ``STACK_GLOBAL`` — following the memo, so
a name assembled on the stack is still found — in plain pickles, legacy ``torch.save`` files
(their five pickles) and ``.npy`` object arrays. picklescan itself only *denies* what it
knows to be dangerous; modelreg *allows* what a tensor file needs (``ALLOWED_GLOBALS``, the
globals ``torch.load(weights_only=True)`` accepts for tensors and state dicts, and
TorchScript's own types) and holds anything else: a name nobody reviewed is not assumed safe.
fickling was the alternative (see benchmarks/bench_scan.py): it decompiles each pickle to a
Python AST, which is slower per file and LGPL-licensed, for a verdict this allow-list already
gives.

Zip archives (``torch.save``'s format, TorchScript, ``.zip`` / ``.bin`` / ``.pt`` of any kind)
are walked here, not by picklescan, so that every member is named in a finding and an archive
nested in an archive is scanned too (up to MAX_NESTING deep).
"""

from __future__ import annotations

import io
import logging
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

# What a file's name says about whether a runtime would unpickle it.
PICKLE_SUFFIXES = frozenset(
    {".pt", ".pth", ".bin", ".ckpt", ".pkl", ".pickle", ".joblib", ".zip", ".npy", ".npz"}
)
MAX_NESTING = 3
# A pickle-bearing zip member is read into memory to be scanned: at most this much of it.
MAX_MEMBER_BYTES = 256 << 20
_PICKLE_MAGIC = tuple(bytes([0x80, protocol]) for protocol in range(6))
_ZIP_MAGIC = b"PK\x03\x04"
_TORCH_LEGACY_SUFFIXES = (".pt", ".pth", ".bin", ".ckpt")

# module -> names a tensor or state-dict pickle may import. From torch's weights-only
# unpickler (torch/_weights_only_unpickler.py: _get_allowed_globals, the storage and dtype
# types, torch._utils' rebuild functions) and TorchScript's archives (its classes are
# ``__torch__.*`` types compiled from the archive's code, not Python imports; its pickles use
# ``torch.jit._pickle`` helpers). ``"*"``: every name of the module.
_STORAGES = frozenset(
    f"{kind}Storage"
    for kind in (
        "Byte",
        "Char",
        "Short",
        "Int",
        "Long",
        "Half",
        "Float",
        "Double",
        "BFloat16",
        "Bool",
        "ComplexFloat",
        "ComplexDouble",
        "QUInt8",
        "QInt8",
        "QInt32",
        "QUInt4x2",
        "QUInt2x4",
        "Untyped",
        "Typed",
    )
)
_DTYPES = frozenset(
    {
        "float32",
        "float",
        "float64",
        "double",
        "float16",
        "half",
        "bfloat16",
        "uint8",
        "int8",
        "int16",
        "short",
        "int32",
        "int",
        "int64",
        "long",
        "bool",
        "complex64",
        "complex128",
        "float8_e4m3fn",
        "float8_e5m2",
        "float8_e4m3fnuz",
        "float8_e5m2fnuz",
        "quint8",
        "qint8",
        "qint32",
        "quint4x2",
        "quint2x4",
    }
)
ALLOWED_GLOBALS: dict[str, frozenset[str] | str] = {
    "collections": frozenset({"OrderedDict", "defaultdict", "Counter"}),
    "torch": _STORAGES
    | _DTYPES
    | frozenset(
        {
            "Size",
            "device",
            "Tensor",
            "strided",
            "sparse_coo",
            "sparse_csr",
            "per_tensor_affine",
            "per_channel_affine",
            "per_channel_affine_float_qparams",
            "contiguous_format",
            "channels_last",
            "preserve_format",
        }
    ),
    "torch._utils": frozenset(
        {
            "_rebuild_tensor",
            "_rebuild_tensor_v2",
            "_rebuild_tensor_v3",
            "_rebuild_parameter",
            "_rebuild_parameter_with_state",
            "_rebuild_qtensor",
            "_rebuild_sparse_tensor",
            "_rebuild_nested_tensor",
            "_rebuild_meta_tensor_no_storage",
            "_rebuild_device_tensor_from_numpy",
        }
    ),
    "torch.nn.parameter": frozenset({"Parameter"}),
    "torch.serialization": frozenset({"_get_layout"}),
    "torch.jit._pickle": frozenset(
        {
            "restore_type_tag",
            "build_intlist",
            "build_tensorlist",
            "build_doublelist",
            "build_boollist",
            "build_tensor_from_id",
        }
    ),
    "builtins": frozenset(
        {"set", "frozenset", "dict", "list", "tuple", "bytearray", "bytes", "complex", "slice"}
    ),
    "__builtin__": frozenset({"set", "frozenset", "dict", "list", "tuple", "bytearray"}),
    "_codecs": frozenset({"encode"}),
    "numpy": frozenset({"dtype", "ndarray"}),
    "numpy.core.multiarray": frozenset({"_reconstruct", "scalar"}),
    "numpy._core.multiarray": frozenset({"_reconstruct", "scalar"}),
    "numpy.dtypes": "*",
}
_TORCHSCRIPT_CLASSES = "__torch__"

# picklescan reports what it flags on its logger; modelreg reports findings itself.
logging.getLogger("picklescan").addHandler(logging.NullHandler())
logging.getLogger("picklescan").propagate = False


@dataclass(frozen=True)
class PickleFinding:
    """A global a pickle would import that is not on the allow-list (``global_name``
    ``module.name``), or a pickle that could not be read to its end (``global_name`` None)."""

    member: str | None  # the archive member holding the pickle; None: the file itself
    global_name: str | None
    message: str


def allowed(module: str, name: str) -> bool:
    """Whether ``module.name`` is on the allow-list."""
    if module == _TORCHSCRIPT_CLASSES or module.startswith(_TORCHSCRIPT_CLASSES + "."):
        return True
    names = ALLOWED_GLOBALS.get(module)
    return names == "*" or (isinstance(names, frozenset) and name in names)


def may_hold_pickle(name: str) -> bool:
    """Whether a runtime could unpickle a file of this name (by its suffix)."""
    return Path(name).suffix.lower() in PICKLE_SUFFIXES


def _findings_of(result: object, member: str | None) -> list[PickleFinding]:
    from picklescan.scanner import SafetyLevel

    found: list[PickleFinding] = []
    for g in getattr(result, "globals", []):
        module, name = str(g.module), str(g.name)
        if g.safety is SafetyLevel.Dangerous:
            why = (
                "a global known to run code"
                if "unknown" not in (module, name)
                else ("a global assembled so that its name cannot be read")
            )
        elif g.safety is SafetyLevel.Innocuous or allowed(module, name):
            continue
        else:
            why = "a global not on the allow-list of tensor types"
        found.append(PickleFinding(member, f"{module}.{name}", f"imports {module}.{name}: {why}"))
    if getattr(result, "scan_err", False):
        found.append(
            PickleFinding(
                member,
                None,
                "a pickle that cannot be read to its end: what the rest imports is unknown",
            )
        )
    return found


def _scan_stream(
    data: IO[bytes], label: str, member: str | None, suffix: str
) -> list[PickleFinding]:
    from picklescan.scanner import scan_bytes

    try:
        result = scan_bytes(data, label, suffix or None)
    except Exception as exc:  # picklescan raises on formats it half-recognises
        return [PickleFinding(member, None, f"could not be scanned ({type(exc).__name__}: {exc})")]
    return _findings_of(result, member)


def _members(archive: zipfile.ZipFile) -> Iterator[zipfile.ZipInfo]:
    infos = archive.infolist()
    # A torch.save / TorchScript archive keeps raw tensor bytes beside its pickles; only the
    # pickles are read (a storage's first bytes can look like a pickle's by chance).
    torch_format = any(i.filename.endswith("/data.pkl") for i in infos)
    for info in infos:
        if info.is_dir():
            continue
        name = info.filename
        if name.endswith("pkl") or Path(name).suffix.lower() in PICKLE_SUFFIXES:
            yield info
        elif not torch_format:
            with archive.open(info) as fh:
                head = fh.read(4)
            if head.startswith(_PICKLE_MAGIC) or head == _ZIP_MAGIC:
                yield info


def _scan_zip(data: IO[bytes], label: str, prefix: str, depth: int) -> list[PickleFinding]:
    try:
        archive = zipfile.ZipFile(data)
    except (zipfile.BadZipFile, OSError) as exc:
        return [PickleFinding(prefix or None, None, f"not a readable zip archive ({exc})")]
    found: list[PickleFinding] = []
    with archive:
        for info in _members(archive):
            member = f"{prefix}{info.filename}"
            try:
                with archive.open(info) as fh:
                    payload = fh.read(MAX_MEMBER_BYTES + 1)
            except (zipfile.BadZipFile, RuntimeError, OSError, NotImplementedError) as exc:
                found.append(PickleFinding(member, None, f"member cannot be read ({exc})"))
                continue
            if len(payload) > MAX_MEMBER_BYTES:
                # A deflate bomb, or a member too large to hold in memory: not scanned, so
                # not clean (nothing read past the bound).
                found.append(
                    PickleFinding(
                        member,
                        None,
                        f"member larger than {MAX_MEMBER_BYTES >> 20} MiB uncompressed: not "
                        "scanned",
                    )
                )
                continue
            if payload.startswith(_ZIP_MAGIC):
                if depth >= MAX_NESTING:
                    found.append(
                        PickleFinding(member, None, f"archives nested deeper than {MAX_NESTING}")
                    )
                else:
                    found += _scan_zip(io.BytesIO(payload), label, member + "!/", depth + 1)
                continue
            suffix = Path(info.filename).suffix.lower()
            found += _scan_stream(
                io.BytesIO(payload),
                f"{label}:{member}",
                member,
                ".pkl" if suffix != ".npy" else suffix,
            )
    return found


def scan_pickle_file(path: Path) -> list[PickleFinding]:
    """Every global ``path`` would import that is not allowed; empty when it is clean (or
    holds no pickle). Nothing is unpickled."""
    with path.open("rb") as fh:
        head = fh.read(4)
        fh.seek(0)
        if head == _ZIP_MAGIC:
            return _scan_zip(fh, str(path), "", 1)
        suffix = path.suffix.lower()
        if (
            suffix in _TORCH_LEGACY_SUFFIXES
            or suffix in (".npy",)
            or head.startswith(_PICKLE_MAGIC)
        ):
            return _scan_stream(fh, str(path), None, suffix)
        if suffix in (".pkl", ".pickle", ".joblib"):
            return _scan_stream(fh, str(path), None, ".pkl")
    return []


def describe(finding: PickleFinding) -> str:
    where = f"{finding.member}: " if finding.member else ""
    return f"{where}{finding.message}"


class UnsafePickleError(Exception):
    """Raised instead of loading a file whose pickles import what is not allowed."""


def require_clean(paths: list[Path]) -> None:
    """Raise ``UnsafePickleError`` naming the first finding in any of ``paths``: called right
    before ``torch.load`` / ``torch.jit.load``."""
    for path in paths:
        findings = scan_pickle_file(path)
        if findings:
            raise UnsafePickleError(
                f"{path.name}: {describe(findings[0])} — not loaded (unsafe_pickle)"
            )
