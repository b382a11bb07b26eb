"""Inferentia2 bundles: NxD Inference compiled directories, optimum-neuron exports, slim
host-embedding deploys and bundles as published — read without running anything from them.

``.pt`` files are pickles or TorchScript archives: loading them runs code. Here they are only
opened as zip archives (entry names and sizes, embedded NEFF sizes); server scripts are parsed,
never imported. Compile facts come from ``neuron_config.json`` (nested ``neuron_config`` for
NxDI, flat for optimum-neuron), from a slim deploy's ``modelreg-deploy.json``, or — for a
bundle as published (config, neff / model.pt, embedding table, server script, Dockerfile) —
from whatever those files state; what none of them states stays unknown and holds the record.

File references inside a bundle stay inside it: no ``..``, no absolute path, no symlink that
leads out.
"""

from __future__ import annotations

import ast
import os
import re
import string
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from modelreg.errors import InvalidArtifact, InvalidInput
from modelreg.manifests.hf import file_role
from modelreg.manifests.hf_config import first_int, read_json_object, text_config
from modelreg.schemas.manifest import FileRole, first_error
from modelreg.schemas.neuron import HostEmbedding, NeuronFacts, ServeEntry

NEURON_CONFIG = "neuron_config.json"
DEPLOY_MANIFEST = "modelreg-deploy.json"
HF_CONFIG = "config.json"
MAX_NEURON_CORES = 24  # inf2.48xlarge, the largest instance
MAX_BUNDLE_FILES = 10_000
MAX_SCRIPT_BYTES = 1 << 20
# Host-side embedding tables a published slim deploy ships beside its neff.
EMBEDDING_TABLE_NAMES = ("embed_tokens.pt", "embed_tokens.safetensors", "embed_tokens.bin")


def bundle_file_role(relative: str) -> FileRole:
    """Role of a file in a bundle: server scripts and Dockerfiles change behaviour too."""
    name = relative.rsplit("/", 1)[-1]
    if name.endswith((".py", ".sh")):
        return "server"
    if name.startswith(("Dockerfile", "Containerfile")):
        return "container"
    return file_role(name)


def confined(directory: Path, reference: str, where: Path) -> Path:
    """The file ``reference`` names inside ``directory``; anything leading outside the bundle
    (``..``, an absolute path, a symlink out) is an ``InvalidArtifact`` naming ``where``."""
    parts = reference.split("/")
    if (
        not reference
        or reference.startswith("/")
        or "\\" in reference
        or ".." in parts
        or re.match(r"^[A-Za-z]:", reference)
    ):
        raise InvalidArtifact(
            where,
            f"file reference {reference!r} must be a relative path inside the bundle "
            "(no '..', no absolute path)",
        )
    root = directory.resolve()
    resolved = (directory / reference).resolve()
    if not resolved.is_relative_to(root):
        raise InvalidArtifact(
            where,
            f"file reference {reference!r} leads outside the bundle through a symlink: "
            "copy the file into the bundle",
        )
    return resolved


def bundle_files(directory: Path) -> list[str]:
    """Every file of the bundle, relative and '/'-separated (hidden entries skipped); a
    symlink leading outside the bundle is refused, one leading inside is the file it names."""
    root = directory.resolve()
    found: list[str] = []
    for current, dirs, files in os.walk(directory, followlinks=False):
        here = Path(current)
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in list(dirs):
            if (here / name).is_symlink():
                confined(directory, (here / name).relative_to(directory).as_posix(), here / name)
                dirs.remove(name)  # its files are already in the bundle under their own path
        for name in sorted(files):
            if name.startswith("."):
                continue
            path = here / name
            relative = path.relative_to(directory).as_posix()
            if path.is_symlink():
                confined(directory, relative, path)
            if not path.resolve().is_file() or not path.resolve().is_relative_to(root):
                continue
            found.append(relative)
            if len(found) > MAX_BUNDLE_FILES:
                raise InvalidArtifact(directory, f"more than {MAX_BUNDLE_FILES} files")
    return sorted(found)


@dataclass(frozen=True)
class PtArchive:
    """What a .pt zip holds, read from its central directory only."""

    entries: int
    neff_entries: dict[str, int]  # name -> uncompressed bytes
    has_pickle: bool


def inspect_pt(path: Path) -> PtArchive:
    """List a .pt archive without unpickling or loading it."""
    try:
        with zipfile.ZipFile(path) as archive:
            infos = archive.infolist()
    except zipfile.BadZipFile:
        raise InvalidArtifact(
            path, "not a zip archive: a .pt file is inspected as one, never unpickled"
        ) from None
    except FileNotFoundError:
        raise InvalidArtifact(path, "file not found") from None
    neffs = {i.filename: i.file_size for i in infos if "neff" in i.filename.lower()}
    pickles = any(i.filename.endswith(".pkl") for i in infos)
    return PtArchive(len(infos), neffs, pickles)


def _has_compiled_graph(directory: Path) -> bool:
    if any(p.is_file() for p in directory.glob("*.neff")):
        return True
    for pt in directory.glob("*.pt"):
        try:
            if inspect_pt(pt).neff_entries:
                return True
        except InvalidArtifact:
            continue
    return False


def is_neuron_bundle(directory: Path) -> bool:
    """A compiled directory, an export, a slim deploy, or a published bundle (an HF config
    beside a neff or a model.pt that embeds one)."""
    if (directory / NEURON_CONFIG).is_file() or (directory / DEPLOY_MANIFEST).is_file():
        return True
    return (directory / HF_CONFIG).is_file() and _has_compiled_graph(directory)


def _buckets(cfg: dict[str, Any]) -> list[int]:
    for key in ("context_encoding_buckets", "buckets", "context_buckets"):
        value = cfg.get(key)
        if isinstance(value, list) and all(
            isinstance(v, int) and not isinstance(v, bool) for v in value
        ):
            return list(value)
    return []


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def _bool(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def read_bundle(directory: Path) -> tuple[NeuronFacts, dict[str, Any]]:
    """Compile facts and the HF config of a bundle directory."""
    deploy = directory / DEPLOY_MANIFEST
    neuron_config = directory / NEURON_CONFIG
    config_path = directory / HF_CONFIG
    hf_config = read_json_object(config_path) if config_path.is_file() else {}
    if deploy.is_file():
        facts = _slim_facts(deploy)
    elif neuron_config.is_file():
        raw = read_json_object(neuron_config)
        nested = raw.get("neuron_config")
        if isinstance(nested, dict):
            facts = _nxdi_facts(neuron_config, nested)
            hf_config = hf_config or {k: v for k, v in raw.items() if k != "neuron_config"}
        else:
            facts = _optimum_facts(neuron_config, raw)
    else:
        facts = _published_facts(directory, hf_config)
    if facts.tp_degree is not None and facts.tp_degree > MAX_NEURON_CORES:
        raise InvalidInput(
            f"{directory}: tp_degree {facts.tp_degree} is larger than any inf2 instance "
            f"({MAX_NEURON_CORES} NeuronCores on inf2.48xlarge)"
        )
    archives = {}
    neff_files = 0
    tables = set(EMBEDDING_TABLE_NAMES)
    if facts.host_embedding is not None:
        tables.add(facts.host_embedding.file)
    for pt in sorted(directory.glob("*.pt")):
        if pt.name in tables:
            continue  # a host-side tensor, not a compiled graph
        info = inspect_pt(pt)
        archives[pt.name] = sorted(info.neff_entries)
        neff_files += sum(info.neff_entries.values())
    neff_files += sum(p.stat().st_size for p in sorted(directory.glob("*.neff")) if p.is_file())
    if neff_files and facts.neff_bytes is None:
        facts.neff_bytes = neff_files
    facts.pt_archives = archives
    return facts, hf_config


def _require_tp(path: Path, tp: int | None) -> int:
    if tp is None:
        raise InvalidArtifact(path, "tp_degree missing: the tensor-parallel degree decides fit")
    if tp < 1:
        raise InvalidArtifact(path, f"tp_degree {tp} must be at least 1")
    return tp


def _facts(path: Path, data: dict[str, Any]) -> NeuronFacts:
    """NeuronFacts from read values, any type error a one-line ``InvalidArtifact``."""
    try:
        return NeuronFacts.model_validate(data)
    except ValidationError as exc:
        raise InvalidArtifact(path, first_error(exc)) from None


def _nxdi_facts(path: Path, nc: dict[str, Any]) -> NeuronFacts:
    return _facts(
        path,
        {
            "layout": "nxdi",
            "tp_degree": _require_tp(path, first_int(nc, "tp_degree")),
            "batch_size": first_int(nc, "batch_size", "max_batch_size"),
            "seq_len": first_int(nc, "seq_len", "max_length"),
            "context_buckets": _buckets(nc),
            "torch_dtype": _str(nc.get("torch_dtype")),
            "quantized": _bool(nc.get("quantized")),
            "quantization_type": _str(nc.get("quantization_type")),
            "quantization_dtype": _str(nc.get("quantization_dtype")),
        },
    )


def _optimum_facts(path: Path, raw: dict[str, Any]) -> NeuronFacts:
    return _facts(
        path,
        {
            "layout": "optimum-neuron",
            "tp_degree": _require_tp(
                path, first_int(raw, "tp_degree", "tensor_parallel_size", "num_cores")
            ),
            "batch_size": first_int(raw, "batch_size"),
            "seq_len": first_int(raw, "sequence_length", "seq_len"),
            "torch_dtype": _str(raw.get("auto_cast_type")) or _str(raw.get("torch_dtype")),
            "compiler_version": _str(raw.get("neuronxcc_version"))
            or _str(raw.get("compiler_version")),
            "optimum_neuron_version": _str(raw.get("optimum_neuron_version")),
        },
    )


# Keys of modelreg-deploy.json taken as NeuronFacts fields (validated by the schema).
_SLIM_KEYS = (
    "batch_size",
    "seq_len",
    "torch_dtype",
    "quantized",
    "quantization_type",
    "quantization_dtype",
    "modules",
    "compiler_version",
    "nxd_version",
    "sdk_version",
    "compiled_on",
    "neff_bytes",
    "compile_host",
    "deploy_host",
    "variants",
    "host_peak_rss_bytes",  # the older spelling of deploy_host.peak_rss_bytes
)


def _slim_facts(path: Path) -> NeuronFacts:
    raw = read_json_object(path)
    if not isinstance(raw.get("host_embedding"), dict):
        raise InvalidArtifact(path, "a slim deploy manifest must describe host_embedding")
    try:
        embedding = HostEmbedding.model_validate(raw["host_embedding"])
    except ValidationError as exc:
        raise InvalidArtifact(path, f"host_embedding.{first_error(exc)}") from None
    table = confined(path.parent, embedding.file, path)
    if not table.is_file():
        raise InvalidArtifact(path, f"host embedding file {embedding.file!r} is missing")
    if embedding.bytes is None:
        embedding.bytes = table.stat().st_size
    data: dict[str, Any] = {k: raw[k] for k in _SLIM_KEYS if k in raw}
    data |= {
        "layout": "slim-host-embedding",
        "tp_degree": _require_tp(path, first_int(raw, "tp_degree")),
        "context_buckets": _buckets(raw),
        "host_embedding": embedding,
    }
    if "serve" in raw:
        data["serve"] = _serve_entry(path, raw["serve"])
    return _facts(path, data)


SERVE_PLACEHOLDERS = frozenset({"python", "bundle", "port"})


def _serve_entry(path: Path, raw: Any) -> ServeEntry:
    """The bundle's serving entry point (``serve: {argv: […], script: server.py}``): its
    script a file of the bundle, its command naming ``{port}`` (where verify asks it) and no
    placeholder but ``{python}``, ``{bundle}``, ``{port}``."""
    if not isinstance(raw, dict):
        raise InvalidArtifact(path, "serve must be an object: {argv: [...], script: FILE}")
    try:
        entry = ServeEntry.model_validate(raw)
    except ValidationError as exc:
        raise InvalidArtifact(path, f"serve.{first_error(exc)}") from None
    script = confined(path.parent, entry.script, path)
    if not script.is_file():
        raise InvalidArtifact(path, f"serve.script {entry.script!r} is not a file of the bundle")
    named: set[str] = set()
    for arg in entry.argv:
        try:
            fields = [f for _, f, _, _ in string.Formatter().parse(arg) if f is not None]
        except ValueError as exc:
            raise InvalidArtifact(path, f"serve.argv {arg[:80]!r}: {exc}") from None
        unknown = [f for f in fields if f not in SERVE_PLACEHOLDERS]
        if unknown:
            raise InvalidArtifact(
                path,
                f"serve.argv {arg[:80]!r} names {{{unknown[0]}}}: the placeholders are "
                "{python}, {bundle} and {port}",
            )
        named.update(fields)
    if "port" not in named:
        raise InvalidArtifact(path, "serve.argv must name {port}: verify chooses where it listens")
    if not any(entry.script in arg for arg in entry.argv):
        raise InvalidArtifact(path, f"serve.argv does not run serve.script {entry.script!r}")
    return entry


# Module-level names a server script uses for the compile shape, e.g. ``TP = 2``,
# ``MAX = 512``, ``BUCKET = 128`` (the seed's server prints "TP=2, MAX=512 BUCKET=128").
_SCRIPT_NAMES = {
    "tp_degree": ("TP", "TP_DEGREE", "TENSOR_PARALLEL", "tp_degree"),
    "seq_len": ("MAX", "MAX_LEN", "MAX_LENGTH", "SEQ_LEN", "MAX_SEQ_LEN", "seq_len"),
    "context_buckets": ("BUCKET", "BUCKETS", "CONTEXT_BUCKETS", "PROMPT_BUCKET"),
}
_DOCKER_PINS = {
    "compiler_version": re.compile(r"neuronx-cc\s*={1,2}\s*([0-9][\w.]*)"),
    "nxd_version": re.compile(r"neuronx-distributed(?:-inference)?\s*={1,2}\s*([0-9][\w.]*)"),
    "optimum_neuron_version": re.compile(r"optimum-neuron\s*={1,2}\s*([0-9][\w.]*)"),
}
# AWS Neuron deep learning containers carry the SDK in their tag: …-sdk2.31.0-ubuntu22.04.
_DOCKER_SDK = re.compile(r"^\s*FROM\s+\S*?sdk(\d+\.\d+(?:\.\d+)?)", re.IGNORECASE | re.MULTILINE)
_DOCKER_ENV = re.compile(r"^\s*ENV\s+(.+)$", re.MULTILINE)


def _literal_int(node: ast.expr) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    # int(os.environ.get("TP", "2")) / int(os.getenv("TP", 2)): the default the script uses
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "int"
        and len(node.args) == 1
        and isinstance(node.args[0], ast.Call)
        and len(node.args[0].args) == 2
        and isinstance(node.args[0].args[1], ast.Constant)
    ):
        default = node.args[0].args[1].value
        if isinstance(default, str) and default.isdigit():
            return int(default)
        if type(default) is int:
            return default
    return None


def _script_facts(path: Path) -> dict[str, tuple[Any, str]]:
    """Compile-shape constants assigned at module level in a server script (parsed, never
    run); a value assigned twice differently is not taken."""
    if path.stat().st_size > MAX_SCRIPT_BYTES:
        return {}
    try:
        tree = ast.parse(path.read_bytes(), filename=path.name)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    values: dict[str, set[Any]] = {}
    for node in tree.body:
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        target = node.targets[0]
        if not isinstance(target, ast.Name):
            continue
        for fact, names in _SCRIPT_NAMES.items():
            if target.id not in names:
                continue
            if fact == "context_buckets" and isinstance(node.value, ast.List | ast.Tuple):
                items = [_literal_int(e) for e in node.value.elts]
                if items and all(i is not None for i in items):
                    values.setdefault(fact, set()).add(tuple(items))
                continue
            number = _literal_int(node.value)
            if number is not None:
                values.setdefault(fact, set()).add(
                    (number,) if fact == "context_buckets" else number
                )
    found: dict[str, tuple[Any, str]] = {}
    for fact, seen in values.items():
        if len(seen) == 1:
            value = next(iter(seen))
            found[fact] = (list(value) if fact == "context_buckets" else value, path.name)
    return found


def _dockerfile_facts(path: Path) -> dict[str, tuple[Any, str]]:
    if path.stat().st_size > MAX_SCRIPT_BYTES:
        return {}
    text = path.read_text(encoding="utf-8", errors="replace")
    found: dict[str, tuple[Any, str]] = {}
    sdk = _DOCKER_SDK.search(text)
    if sdk:
        found["sdk_version"] = (sdk.group(1), f"{path.name}: FROM …sdk{sdk.group(1)}")
    for fact, pattern in _DOCKER_PINS.items():
        pins = set(pattern.findall(text))
        if len(pins) == 1:
            version = pins.pop()
            found[fact] = (version, f"{path.name}: pinned {version}")
    env: dict[str, str] = {}
    for line in _DOCKER_ENV.findall(text):
        for key, value in re.findall(r"(\w+)[= ]\"?([^\s\"]+)\"?", line):
            env[key] = value
    for fact, names in _SCRIPT_NAMES.items():
        for name in names:
            if name in env and env[name].isdigit():
                number = int(env[name])
                value = [number] if fact == "context_buckets" else number
                found[fact] = (value, f"{path.name}: ENV {name}={number}")
    return found


def _published_facts(directory: Path, hf_config: dict[str, Any]) -> NeuronFacts:
    """What a bundle as published states about its compile: config (an NxD config may be
    nested in it), Dockerfile pins and base image, server-script constants. Nothing guessed."""
    derived: dict[str, tuple[Any, str]] = {}
    nested = hf_config.get("neuron_config")
    if isinstance(nested, dict):
        for fact, value in (
            ("tp_degree", first_int(nested, "tp_degree")),
            ("seq_len", first_int(nested, "seq_len", "max_length")),
            ("context_buckets", _buckets(nested) or None),
            ("quantized", _bool(nested.get("quantized"))),
            ("quantization_type", _str(nested.get("quantization_type"))),
            ("quantization_dtype", _str(nested.get("quantization_dtype"))),
            ("torch_dtype", _str(nested.get("torch_dtype"))),
        ):
            if value is not None:
                derived[fact] = (value, f"{HF_CONFIG}: neuron_config.{fact}")
    for script in sorted(directory.glob("*.py")):
        for fact, found in _script_facts(script).items():
            derived.setdefault(fact, found)
    for dockerfile in sorted(directory.glob("Dockerfile*")):
        if dockerfile.is_file():
            for fact, found in _dockerfile_facts(dockerfile).items():
                derived.setdefault(fact, found)
    dtype = (
        _str(hf_config.get("torch_dtype"))
        or _str(hf_config.get("dtype"))
        or _str(text_config(hf_config).get("dtype"))
    )
    if "torch_dtype" not in derived and dtype:
        derived["torch_dtype"] = (dtype, f"{HF_CONFIG}: torch_dtype of the source checkpoint")
    data: dict[str, Any] = {fact: value for fact, (value, _) in derived.items()}
    data["layout"] = "published"
    data["derived_from"] = {fact: where for fact, (_, where) in sorted(derived.items())}
    for name in EMBEDDING_TABLE_NAMES:
        table = directory / name
        if table.is_file():
            hidden = first_int(text_config(hf_config), "hidden_size")
            data["host_embedding"] = HostEmbedding(
                file=name,
                bytes=table.stat().st_size,
                hidden_size=hidden,
                source=f"{name} as published: the scale its server applies is not stated",
            )
            break
    return _facts(directory, data)
