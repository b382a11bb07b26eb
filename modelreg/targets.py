"""Targets: where an artifact will run. The list of targets lives here and nowhere else.

Built in: ``cpu`` (this host, facts read from the OS) and the Inferentia2 instance profiles.
User-defined targets come from a YAML file (``$MODELREG_TARGETS`` or
``$MODELREG_HOME/targets.yaml``)::

    targets:
      xeon-avx1:
        kind: cpu
        description: 2013 dual Xeon E5-2690 v2, AVX1 only
        # Ivy Bridge-EP: AVX and F16C, no AVX2 / FMA3 / BMI (manifests/targets.yaml has the
        # full list)
        cpu_flags: [sse, sse2, pni, ssse3, sse4_1, sse4_2, popcnt, aes, pclmulqdq, avx, f16c]
        memory_gib: 256
        swap_gib: 0                # declared swap; host-memory checks count only what is declared
        hosts: ["xeon-*"]          # hostnames (globs) that are this target
        golden_prompts:
          - {prompt: "Q: What is the capital of France?\\nA:", expect: Paris}
        runtime: {llama.cpp: b6000}  # what its hosts run (evidence expires when it changes;
                                     # verify must exercise it: give launch or endpoint)
        verify_timeout_seconds: 300  # default: 300 for cpu targets, 900 for neuron targets
        # The runtime that serves (README: "Checking the deployed runtime"):
        # verify starts it on 127.0.0.1 with the record's file and judges what it answers.
        launch: [/opt/ik_llama.cpp/build/bin/llama-server, -m, "{model}", --port, "{port}"]
        forbidden_flags: [--run-time-repack, -rtr]
        required_build_flags: [GGML_USE_IQK_MULMAT=OFF]
        # Or a server that is already running (not both):
        #   endpoint: https://llm.example.com      # OpenAI-compatible
        #   token_env: LLM_API_TOKEN              # the variable holding the bearer token
        #   image: registry.example.com/llm/server@sha256:<64 hex>
        #   require_identity: true                # default: an unconfirmed model blocks

Checks that need the target's hardware (a real generation) run only on a host that *is* the
target; elsewhere they report ``unavailable``.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from modelreg import config, host
from modelreg.errors import InvalidInput, TargetNotFound
from modelreg.schemas.manifest import GoldenPrompt, first_error

if TYPE_CHECKING:
    from modelreg.deployed_unit import RuntimeFields

GiB = 1 << 30
# A target name shared through the registry: 1-100 letters, digits, '.', '_' or '-'.
TARGET_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
SHARED_ORIGIN = "registry"
LOCAL_ORIGIN = "local:"
NEURON_CORE_HBM_BYTES = 16 * GiB
MAX_TARGETS_FILE_BYTES = 1 << 20

TargetKind = Literal["cpu", "neuron"]

# How long a verify waits for a runtime check, per target kind, unless the target says.
# A cold inf2 start is slow: the Gemma-4 26B-A4B slim deploy loads its 26.8 GB neff in 112 s
# from a warm disk and was ready after 491 s on a fresh inf2.xlarge pulling from cold EBS
# (../shared/seeds/001_f0b27c556ce7a172.txt) — 300 s would call a good build a timeout.
DEFAULT_VERIFY_TIMEOUT_SECONDS: dict[str, float] = {"cpu": 300.0, "neuron": 900.0}


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
    # Swap its hosts have, as declared (None: undeclared, counted as none in memory checks).
    swap_bytes: int | None = None
    verify_timeout_seconds: float = DEFAULT_VERIFY_TIMEOUT_SECONDS["cpu"]
    # Trust policy: public keys (PEM files) whose model-signing signature over an artifact's
    # files it requires, and whose signature over a verify run it requires for the run to
    # count. Empty: no signature required.
    trust_artifact_keys: tuple[str, ...] = ()
    trust_verifier_keys: tuple[str, ...] = ()
    # The golden suite every verify on this target runs: a suite file, or a built-in name
    # ("default-chat"). None: the record's golden prompts, else the Paris check.
    suite: str | None = None
    # The deployed unit beside the record (modelreg.deployed_unit): a served OpenAI-compatible
    # endpoint (base URL, no credentials) and the environment variable holding its bearer
    # token; or the command that launches the runtime, with {model} and {port} placeholders,
    # the flags it must not get and the build flags it must have; a pinned container image.
    endpoint: str | None = None
    token_env: str | None = None
    require_identity: bool = True  # an endpoint whose model is not confirmed blocks
    launch: tuple[str, ...] = ()
    forbidden_flags: tuple[str, ...] = ()
    required_build_flags: tuple[str, ...] = ()
    image: str | None = None

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
            verify_timeout_seconds=DEFAULT_VERIFY_TIMEOUT_SECONDS["neuron"],
        )
    return targets


def builtin_names() -> frozenset[str]:
    """Names no shared or local target may take."""
    return frozenset({"cpu", *INF2_INSTANCES})


class _TrustSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    artifact_keys: list[str] = Field(default_factory=list)
    verifier_keys: list[str] = Field(default_factory=list)


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
    swap_gib: float | None = Field(default=None, ge=0)
    verify_timeout_seconds: float | None = Field(default=None, gt=0, le=86400)
    trust: _TrustSpec = Field(default_factory=_TrustSpec)
    suite: str | None = Field(default=None, min_length=1)
    endpoint: str | None = None
    token_env: str | None = None
    require_identity: bool | None = None
    launch: list[str | int | float] | None = None
    forbidden_flags: list[str] | None = None
    required_build_flags: list[str] | None = None
    image: str | None = None


BUILTIN_SUITES = ("default-chat",)


def _relative_to(base: Path, value: str) -> str:
    """A path given in a targets file, resolved against the file's directory."""
    return str((base / Path(value).expanduser()).resolve())


def _runtime_fields(path: Path, name: str, spec: _TargetSpec) -> RuntimeFields:
    """The deployed-unit fields, validated; one line naming the target and field if not."""
    from modelreg.deployed_unit import UnitFieldError, check_runtime_fields
    from modelreg.secrets import note_token_env

    try:
        fields = check_runtime_fields(
            endpoint=spec.endpoint,
            token_env=spec.token_env,
            require_identity=spec.require_identity,
            launch=[str(arg) for arg in spec.launch] if spec.launch is not None else None,
            forbidden_flags=spec.forbidden_flags,
            required_build_flags=spec.required_build_flags,
            image=spec.image,
        )
    except UnitFieldError as exc:
        raise InvalidInput(f"{path}: targets.{name}.{exc.field}: {exc.message}", exc.hint) from None
    # The variable's value is a bearer token: hidden from every message from now on.
    note_token_env(fields.token_env)
    return fields


class _TargetsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    targets: dict[str, _TargetSpec] = Field(default_factory=dict)


def read_target_specs(path: Path) -> dict[str, _TargetSpec]:
    """The validated definitions of a targets YAML file (none when it does not exist). Paths
    in them (trusted keys, suite files) are made absolute against the file's directory, so a
    definition means the same wherever it is stored (the registry, for shared targets)."""
    from modelreg.safeyaml import read_yaml_file

    if not path.exists():
        return {}
    data = read_yaml_file(path, max_bytes=MAX_TARGETS_FILE_BYTES, what="targets file") or {}
    try:
        parsed = _TargetsFile.model_validate(data)
    except ValidationError as exc:
        raise InvalidInput(f"{path}: {first_error(exc)}") from None
    from modelreg.limits import TARGET_NAME_MAX, check_length

    specs = {}
    for name, spec in parsed.targets.items():
        check_length(f"{path}: target name", name, TARGET_NAME_MAX)
        _runtime_fields(path, name, spec)  # bad launch / endpoint / image: refused here
        specs[name] = spec.model_copy(
            update={
                "trust": _TrustSpec(
                    artifact_keys=[_relative_to(path.parent, k) for k in spec.trust.artifact_keys],
                    verifier_keys=[_relative_to(path.parent, k) for k in spec.trust.verifier_keys],
                ),
                "suite": spec.suite
                if spec.suite is None or spec.suite in BUILTIN_SUITES
                else _relative_to(path.parent, spec.suite),
            }
        )
    return specs


def spec_as_json(spec: _TargetSpec) -> dict[str, Any]:
    """A definition as stored in the registry: JSON, defaults left out (so a later modelreg
    that adds an optional field reads the same definition the same way)."""
    return spec.model_dump(mode="json", exclude_defaults=True)


def spec_from_json(name: str, data: dict[str, Any]) -> _TargetSpec:
    try:
        return _TargetSpec.model_validate(data)
    except ValidationError as exc:
        raise InvalidInput(f"target {name!r} in the registry: {first_error(exc)}") from None


def check_shared_spec(name: str, data: Any, where: str) -> dict[str, Any]:
    """A definition to store as a shared target, from anywhere but ``targets add`` (an
    export file): checked as ``targets add`` checks a YAML file — a valid name that is not
    built in, a valid spec, valid deployed-unit fields, absolute key and suite paths (a
    relative one would resolve against whatever directory judges) — and returned in the
    stored form. One-line ``InvalidInput`` otherwise."""
    if not TARGET_NAME_RE.fullmatch(name):
        raise InvalidInput(f"{where}: target name {name[:120]!r} is not a valid name")
    if name in builtin_names():
        raise InvalidInput(f"{where}: target {name!r} is built in and cannot be redefined")
    if not isinstance(data, dict):
        raise InvalidInput(f"{where}: target {name!r}: its definition is not an object")
    try:
        spec = _TargetSpec.model_validate(data)
    except ValidationError as exc:
        raise InvalidInput(f"{where}: target {name!r}: {first_error(exc)}") from None
    _runtime_fields(Path(where), name, spec)
    paths = [*spec.trust.artifact_keys, *spec.trust.verifier_keys]
    if spec.suite is not None and spec.suite not in BUILTIN_SUITES:
        paths.append(spec.suite)
    relative = [p for p in paths if not Path(p).is_absolute()]
    if relative:
        raise InvalidInput(f"{where}: target {name!r}: path {relative[0][:200]!r} is not absolute")
    return spec_as_json(spec)


def _target_from_spec(name: str, spec: _TargetSpec, origin: str) -> Target:
    is_local = any(fnmatch.fnmatch(host.hostname(), pattern) for pattern in spec.hosts)
    # A target this host belongs to can read what it did not declare from the OS.
    memory = int(spec.memory_gib * GiB) if spec.memory_gib else None
    if memory is None and is_local and spec.kind == "cpu":
        memory = host.memory_total_bytes()
    served = _runtime_fields(Path(origin.removeprefix(LOCAL_ORIGIN)), name, spec)
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
        swap_bytes=int(spec.swap_gib * GiB) if spec.swap_gib is not None else None,
        verify_timeout_seconds=spec.verify_timeout_seconds
        or DEFAULT_VERIFY_TIMEOUT_SECONDS[spec.kind],
        trust_artifact_keys=tuple(spec.trust.artifact_keys),
        trust_verifier_keys=tuple(spec.trust.verifier_keys),
        suite=spec.suite,
        endpoint=served.endpoint,
        token_env=served.token_env,
        require_identity=served.require_identity,
        launch=served.launch,
        forbidden_flags=served.forbidden_flags,
        required_build_flags=served.required_build_flags,
        image=served.image,
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
