"""Targets: where an artifact will run. The list of targets lives here and nowhere else.

Built in: ``cpu`` (this host, facts read from the OS) and the Inferentia2 instance profiles.
User-defined targets come from a YAML file (``$MODELREG_TARGETS`` or
``$MODELREG_HOME/targets.yaml``)::

    targets:
      xeon-avx1:
        kind: cpu
        description: 2013 dual Xeon E5-2690 v2, AVX1 only
        cpu_flags: [pni, ssse3, sse4_1, sse4_2, avx, popcnt]
        memory_gib: 256
        hosts: ["xeon-*"]          # hostnames (globs) that are this target
        golden_prompts:
          - {prompt: "Q: What is the capital of France?\\nA:", expect: Paris}
        runtime: {llama.cpp: b6000}  # what its hosts run: evidence expires when it changes

Checks that need the target's hardware (a real generation) run only on a host that *is* the
target; elsewhere they report ``unavailable``.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from modelreg import config, host
from modelreg.errors import InvalidInput, TargetNotFound
from modelreg.schemas.manifest import GoldenPrompt, first_error

GiB = 1 << 30
SHARED_ORIGIN = "registry"
LOCAL_ORIGIN = "local:"
NEURON_CORE_HBM_BYTES = 16 * GiB
MAX_TARGETS_FILE_BYTES = 1 << 20

TargetKind = Literal["cpu", "neuron"]


@dataclass(frozen=True)
class Target:
    name: str
    kind: TargetKind
    description: str
    memory_bytes: int | None  # host RAM
    cpu_flags: frozenset[str] | None  # None: not declared
    is_local: bool  # this host is the target: hardware checks may run here
    neuron_cores: int = 0
    neuron_devices: int = 0
    golden_prompts: tuple[GoldenPrompt, ...] = ()
    origin: str = "builtin"
    hosts: tuple[str, ...] = field(default=())
    # Runtime the target's hosts run, as declared (e.g. {"llama.cpp": "b6000"}); part of the
    # fingerprint that makes evidence expire.
    runtime: dict[str, str] = field(default_factory=dict)

    @property
    def hbm_bytes(self) -> int:
        return self.neuron_cores * NEURON_CORE_HBM_BYTES


# name: (Neuron devices, NeuronCores, host RAM GiB) — AWS's published inf2 table.
INF2_INSTANCES: dict[str, tuple[int, int, int]] = {
    "inf2.xlarge": (1, 2, 16),
    "inf2.8xlarge": (1, 2, 128),
    "inf2.24xlarge": (6, 12, 384),
    "inf2.48xlarge": (12, 24, 768),
}


def neuron_device_visible() -> bool:
    return Path("/dev/neuron0").exists()


def _builtin() -> dict[str, Target]:
    targets = {
        "cpu": Target(
            name="cpu",
            kind="cpu",
            description=f"this host ({host.hostname()}): {host.cpu_model()}",
            memory_bytes=host.memory_total_bytes(),
            cpu_flags=host.cpu_flags(),
            is_local=True,
        )
    }
    for name, (devices, cores, ram_gib) in INF2_INSTANCES.items():
        targets[name] = Target(
            name=name,
            kind="neuron",
            description=f"AWS {name}: {cores} NeuronCores, {cores * 16} GiB HBM, "
            f"{ram_gib} GiB host RAM",
            memory_bytes=ram_gib * GiB,
            cpu_flags=None,
            is_local=neuron_device_visible(),
            neuron_cores=cores,
            neuron_devices=devices,
        )
    return targets


def builtin_names() -> frozenset[str]:
    """Names no shared or local target may take."""
    return frozenset({"cpu", *INF2_INSTANCES})


class _TargetSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: TargetKind = "cpu"
    description: str = ""
    cpu_flags: list[str] | None = None
    memory_gib: float | None = Field(default=None, gt=0)
    hosts: list[str] = Field(default_factory=list)
    neuron_cores: int = Field(default=0, ge=0)
    golden_prompts: list[GoldenPrompt] = Field(default_factory=list)
    runtime: dict[str, str | int | float] = Field(default_factory=dict)


class _TargetsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    targets: dict[str, _TargetSpec] = Field(default_factory=dict)


def read_target_specs(path: Path) -> dict[str, _TargetSpec]:
    """The validated definitions of a targets YAML file (none when it does not exist)."""
    import yaml

    if not path.exists():
        return {}
    try:
        if path.stat().st_size > MAX_TARGETS_FILE_BYTES:
            raise InvalidInput(f"{path}: targets file larger than {MAX_TARGETS_FILE_BYTES} bytes")
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        parsed = _TargetsFile.model_validate(data)
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"{path}: not valid YAML: {str(exc).splitlines()[0]}") from None
    except ValidationError as exc:
        raise InvalidInput(f"{path}: {first_error(exc)}") from None
    return dict(parsed.targets)


def spec_as_json(spec: _TargetSpec) -> dict[str, Any]:
    """A definition as stored in the registry: JSON, defaults left out (so a later modelreg
    that adds an optional field reads the same definition the same way)."""
    return spec.model_dump(mode="json", exclude_defaults=True)


def spec_from_json(name: str, data: dict[str, Any]) -> _TargetSpec:
    try:
        return _TargetSpec.model_validate(data)
    except ValidationError as exc:
        raise InvalidInput(f"target {name!r} in the registry: {first_error(exc)}") from None


def _target_from_spec(name: str, spec: _TargetSpec, origin: str) -> Target:
    is_local = any(fnmatch.fnmatch(host.hostname(), pattern) for pattern in spec.hosts)
    # A target this host belongs to can read what it did not declare from the OS.
    memory = int(spec.memory_gib * GiB) if spec.memory_gib else None
    if memory is None and is_local and spec.kind == "cpu":
        memory = host.memory_total_bytes()
    return Target(
        name=name,
        kind=spec.kind,
        description=spec.description or f"user-defined {spec.kind} target",
        memory_bytes=memory,
        cpu_flags=frozenset(spec.cpu_flags) if spec.cpu_flags is not None else None,
        is_local=is_local,
        neuron_cores=spec.neuron_cores,
        golden_prompts=tuple(spec.golden_prompts),
        origin=origin,
        hosts=tuple(spec.hosts),
        runtime={key: str(value) for key, value in spec.runtime.items()},
    )


def all_targets(
    path: Path | None = None, shared: dict[str, dict[str, Any]] | None = None
) -> dict[str, Target]:
    """Built-in targets, then those shared through the registry (``shared``: name -> stored
    definition, origin "registry"), then the local targets file (origin "local:PATH").

    Neither may redefine a built-in. A local definition of a shared target must be the same
    definition (then the shared one is used): a teammate's differing copy would judge the same
    evidence differently, so it is refused with the way out.
    """
    targets = _builtin()
    shared_specs = {name: spec_from_json(name, data) for name, data in (shared or {}).items()}
    for name, spec in shared_specs.items():
        if name not in targets:  # a newer modelreg's built-in wins over a stored name
            targets[name] = _target_from_spec(name, spec, SHARED_ORIGIN)
    user_file = path or config.targets_file()
    for name, spec in read_target_specs(user_file).items():
        if name in shared_specs:
            if spec != shared_specs[name]:
                raise InvalidInput(
                    f"{user_file}: target {name!r} differs from its definition in the registry",
                    f"remove it from {user_file}, or share your version: modelreg targets add "
                    f"{user_file}",
                )
            continue
        if name in targets:
            raise InvalidInput(f"{user_file}: target {name!r} is built in and cannot be redefined")
        targets[name] = _target_from_spec(name, spec, f"{LOCAL_ORIGIN}{user_file}")
    return targets


def get_target(name: str, path: Path | None = None) -> Target:
    targets = all_targets(path)
    if name not in targets:
        raise TargetNotFound(name, sorted(targets))
    return targets[name]
