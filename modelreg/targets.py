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
        # Speed and memory gates of this target's hosts, on top of the suite's quality gates
        # (the names of a suite's thresholds; a suite meant for every host has none):
        gates: {min_decode_tokens_per_s: 20, max_ttft_ms: 2000, max_peak_rss_gib: 4}
        # What one host costs and draws: runs report $ and Wh per 1,000 generated tokens.
        cost_per_hour_usd: 0.76
        power_watts: 500

A definition is a fact of the registry, the same for every reader: a targets file is a way to
write definitions (``modelreg targets apply FILE``), never read when a verdict is made. Paths in
the file (trusted keys, a suite) are read when it is applied and their contents stored with the
definition. The built-in ``cpu`` declares nothing about its hosts: its runtime and CPU flags are
what verify observed on them (``runtime_reports``).

Checks that need the target's hardware (a real generation) run only on a host that *is* the
target (``for_host``); elsewhere they report ``unavailable``.
"""

from __future__ import annotations

import fnmatch
import functools
import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError

from modelreg import host, limits
from modelreg.errors import InvalidInput, TargetNotFound
from modelreg.license_policy import Decision
from modelreg.schemas.manifest import GoldenPrompt, first_error
from modelreg.schemas.suite import ResourceGates
from modelreg.serving import (
    MAX_OUTPUT_TOKENS,
    MAX_PARALLEL,
    MAX_SERVED_CONTEXT,
    KVDtype,
    Serving,
    launch_serving,
)

if TYPE_CHECKING:
    from modelreg.deployed_unit import RuntimeFields

GiB = 1 << 30
# A target name shared through the registry: 1-100 letters, digits, '.', '_' or '-'.
TARGET_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
SHARED_ORIGIN = "registry"
NEURON_CORE_HBM_BYTES = 16 * GiB
MAX_TARGETS_FILE_BYTES = 1 << 20

TargetKind = Literal["cpu", "neuron"]

# How long a verify waits for a runtime check, per target kind, unless the target says.
# A cold inf2 start is slow: the Gemma-4 26B-A4B slim deploy loads its 26.8 GB neff in 112 s
# from a warm disk and was ready after 491 s on a fresh inf2.xlarge pulling from cold EBS
# (../shared/seeds/001_f0b27c556ce7a172.txt) — 300 s would call a good build a timeout.
DEFAULT_VERIFY_TIMEOUT_SECONDS: dict[str, float] = {"cpu": 300.0, "neuron": 900.0}


@dataclass(frozen=True)
class TrustedKey:
    """A public key a target trusts: where it was read from when the target was applied (a
    label, shown), and the key itself (PEM), stored with the definition."""

    label: str
    pem: str


@dataclass(frozen=True)
class Target:
    name: str
    kind: TargetKind
    description: str
    memory_bytes: int | None  # host RAM
    cpu_flags: frozenset[str] | None  # None: not declared
    # This host is one of the target's hosts: hardware checks may run here. Never part of a
    # definition (``all_targets`` gives False): set by ``for_host`` for a verify on this host.
    is_local: bool = False
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
    trust_artifact_keys: tuple[TrustedKey, ...] = ()
    trust_verifier_keys: tuple[TrustedKey, ...] = ()
    # The golden suite every verify on this target runs: a built-in name ("default-chat"), or
    # the path a suite file was applied from (a label) with the suite itself (``suite_json``,
    # stored with the definition). None: the record's golden prompts, else the Paris check.
    suite: str | None = None
    suite_json: str | None = None
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
    # What its runtime serves: context per sequence, parallel sequences, output limit, KV
    # cache type (the ``serving`` block and the launch's flags, which must agree).
    serving: Serving | None = None
    # Resource gates its hosts must meet on every suite run here (``gates:``), on top of the
    # suite's own; None: none declared.
    gates: ResourceGates | None = None
    # Which licenses may be deployed here ({license class or id: allow | warn | deny},
    # modelreg.license_policy): a denied record is not deployable here. A verdict input, not
    # evidence: changing it changes verdicts at once and expires no run.
    license_policy: dict[str, Decision] = field(default_factory=dict)
    # What one of its hosts costs ($/hour) and draws (watts), as declared; None: not declared.
    cost_per_hour_usd: float | None = None
    power_watts: float | None = None
    # The record every verify here is compared with (``reference-agreement``, required when
    # named: a verify that compared none is ``unavailable``); None: none named.
    reference: str | None = None
    # The deploy gate passes a production record a break-glass rollback forced here while it is
    # only stale (by default only a caller that accepts forced entries gets it).
    accept_forced: bool = False
    # The stored definition's digest (``spec_digest``; None: built in).
    spec_sha256: str | None = None
    # ``for_host``: the definition this host's view was made from (None: this is one).
    definition: Target | None = field(default=None, compare=False, repr=False)

    @property
    def defined(self) -> Target:
        """The registry's definition of the target (what evidence is judged under), never a
        host's view of it."""
        return self.definition or self

    @property
    def runs_ik_llama(self) -> bool:
        """Its hosts run ik_llama.cpp as declared in ``runtime`` (a declaration verify must
        see exercised), with its MLA cache on: a runtime that caches MLA's latent for every
        DeepSeek conversion. ``-mla 0`` in its launch caches per-head K and V instead."""
        named = [*self.runtime, *self.runtime.values()]
        if not any("ikllama" in re.sub(r"[-_.]", "", str(v).lower()) for v in named):
            return False
        for flag, value in zip(self.launch, self.launch[1:], strict=False):
            if flag in ("-mla", "--mla-use") and value.strip() == "0":
                return False
        return True

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
    """The built-in definitions: the same on every host (nothing here is read from the OS)."""
    targets = {
        "cpu": Target(
            name="cpu",
            kind="cpu",
            description="any CPU host: its runtime, CPU flags and memory are what verify "
            "observed there",
            memory_bytes=None,
            cpu_flags=None,
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
            neuron_cores=cores,
            neuron_devices=devices,
            verify_timeout_seconds=DEFAULT_VERIFY_TIMEOUT_SECONDS["neuron"],
        )
    return targets


_BUILTIN = _builtin()


def for_host(target: Target) -> Target:
    """The target as a verify on this host sees it: whether this host is one of its hosts
    (built-in ``cpu``: any host; an inf2 profile: a host with a Neuron device; a defined
    target: its ``hosts`` globs), and, for a CPU target that declares no memory, this host's.
    What a verify observes here enters a verdict only as the evidence it records."""
    if target.origin == "builtin":
        here = target.kind == "cpu" or neuron_device_visible()
    else:
        here = any(fnmatch.fnmatch(host.hostname(), pattern) for pattern in target.hosts)
    memory = target.memory_bytes
    if memory is None and here and target.kind == "cpu":
        memory = host.memory_total_bytes()
    return replace(target, is_local=here, memory_bytes=memory, definition=target.defined)


def builtin_names() -> frozenset[str]:
    """Names no shared or local target may take."""
    return frozenset({"cpu", *INF2_INSTANCES})


MAX_TRUSTED_KEYS = 32
MAX_KEY_PEM_CHARS = 16_384


class _TrustSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # Key files (paths, as labels); ``*_pems``: the keys themselves, read from the files when
    # the definition is applied (or given inline), in the same order.
    artifact_keys: list[str] = Field(default_factory=list, max_length=MAX_TRUSTED_KEYS)
    verifier_keys: list[str] = Field(default_factory=list, max_length=MAX_TRUSTED_KEYS)
    artifact_key_pems: list[str] = Field(default_factory=list, max_length=MAX_TRUSTED_KEYS)
    verifier_key_pems: list[str] = Field(default_factory=list, max_length=MAX_TRUSTED_KEYS)


class _ServingSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # Strict: `true` or "2048" is not a context size.
    context: StrictInt | None = Field(default=None, gt=0, le=MAX_SERVED_CONTEXT)
    parallel: StrictInt | None = Field(default=None, gt=0, le=MAX_PARALLEL)
    max_output_tokens: StrictInt | None = Field(default=None, gt=0, le=MAX_OUTPUT_TOKENS)
    kv_dtype: KVDtype | None = None  # K and V, unless kv_dtype_v says otherwise for V
    kv_dtype_v: KVDtype | None = None


class _TargetSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: TargetKind = "cpu"
    description: str = Field(default="", max_length=limits.MAX_DESCRIPTION_CHARS)
    cpu_flags: list[str] | None = Field(default=None, max_length=limits.MAX_TARGET_FLAGS)
    memory_gib: float | None = Field(default=None, gt=0, le=limits.MAX_TARGET_MEMORY_GIB)
    hosts: list[str] = Field(default_factory=list, max_length=limits.MAX_TARGET_HOSTS)
    neuron_cores: int = Field(default=0, ge=0, le=limits.MAX_TP_DEGREE)
    golden_prompts: list[GoldenPrompt] = Field(
        default_factory=list, max_length=limits.MAX_TARGET_PROMPTS
    )
    runtime: dict[str, str | int | float] = Field(
        default_factory=dict, max_length=limits.MAX_TARGET_FLAGS
    )
    swap_gib: float | None = Field(default=None, ge=0, le=limits.MAX_TARGET_MEMORY_GIB)
    verify_timeout_seconds: float | None = Field(default=None, gt=0, le=86400)
    trust: _TrustSpec = Field(default_factory=_TrustSpec)
    suite: str | None = Field(default=None, min_length=1)
    # The suite file's content, stored when the definition is applied.
    suite_content: dict[str, Any] | None = None
    endpoint: str | None = None
    token_env: str | None = None
    require_identity: bool | None = None
    launch: list[str | int | float] | None = None
    forbidden_flags: list[str] | None = Field(default=None, max_length=limits.MAX_TARGET_FLAGS)
    required_build_flags: list[str] | None = Field(default=None, max_length=limits.MAX_TARGET_FLAGS)
    image: str | None = None
    serving: _ServingSpec | None = None
    gates: ResourceGates | None = None
    # {license class or license id: allow | warn | deny} (modelreg.license_policy.policy).
    license_policy: dict[str, Literal["allow", "warn", "deny"]] | None = None
    # What one host costs and draws (modelreg.costs): runs report cost and energy per 1,000
    # generated tokens at the rate they measured.
    cost_per_hour_usd: float | None = Field(default=None, gt=0, le=limits.MAX_COST_PER_HOUR_USD)
    power_watts: float | None = Field(default=None, gt=0, le=limits.MAX_POWER_WATTS)
    # A record (its id) whose outputs every verify here must agree with (reference-agreement).
    reference: str | None = Field(default=None, min_length=1, max_length=200)
    # The deploy gate's policy for a production record forced here by a break-glass rollback.
    accept_forced: bool = False


BUILTIN_SUITES = ("default-chat",)


def _serving(path: Path, name: str, spec: _TargetSpec) -> Serving | None:
    """The target's serving configuration: its ``serving`` block and what its launch flags
    give, which must agree (one line naming the field if not)."""
    from modelreg.deployed_unit import UnitFieldError

    declared = spec.serving.model_dump(exclude_none=True) if spec.serving is not None else {}
    try:
        launched = launch_serving([str(a) for a in spec.launch]) if spec.launch else {}
    except UnitFieldError as exc:
        raise InvalidInput(f"{path}: targets.{name}.{exc.field}: {exc.message}") from None
    if not declared and not launched:
        return None
    # One cache type given names both K and V in serving; on a launch the other stays f16.
    if "kv_dtype" in declared:
        declared.setdefault("kv_dtype_v", declared["kv_dtype"])
    if "kv_dtype" in launched or "kv_dtype_v" in launched:
        launched.setdefault("kv_dtype", "f16")
        launched.setdefault("kv_dtype_v", "f16")
    for key, value in launched.items():
        if key == "unified" or key not in declared:
            continue
        mine = declared[key]
        if key == "context" and value == 0:
            raise InvalidInput(
                f"{path}: targets.{name}.serving.context: {mine} declared, the launch serves "
                "the model's trained context (-c 0)",
                "give the context on the launch (-c) and in serving.context alike",
            )
        if mine != value:
            raise InvalidInput(
                f"{path}: targets.{name}.serving.{key}: {mine} declared, the launch gives {value}",
                "make serving and the launch flags agree (the launch is what will serve)",
            )
    merged = launched | declared
    output, per_sequence = merged.get("max_output_tokens"), merged.get("context")
    if output and per_sequence and output >= per_sequence:
        raise InvalidInput(
            f"{path}: targets.{name}.serving.max_output_tokens: {output} is not below the "
            f"{per_sequence}-token context a sequence holds (the prompt needs room too)"
        )
    source = "serving and launch" if declared and launched else "serving" if declared else "launch"
    k = merged.get("kv_dtype", "f16")
    return Serving(
        context=merged.get("context") or None,
        parallel=merged.get("parallel", 1),
        max_output_tokens=merged.get("max_output_tokens"),
        kv_dtype_k=k,
        kv_dtype_v=merged.get("kv_dtype_v", k),
        source=source,
        unified=bool(merged.get("unified", False)),
    )


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
    """The validated definitions of a targets YAML file (none when it does not exist), with
    what their paths name read and stored in them (``_embed``): trusted keys' PEMs and suite
    files' contents, so a definition means the same on every host that reads it. Paths are
    resolved against the file's directory and kept as labels."""
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
        _serving(path, name, spec)  # a bad serving block, or one the launch contradicts
        specs[name] = _embed(
            spec.model_copy(
                update={
                    "trust": spec.trust.model_copy(
                        update={
                            "artifact_keys": [
                                _relative_to(path.parent, k) for k in spec.trust.artifact_keys
                            ],
                            "verifier_keys": [
                                _relative_to(path.parent, k) for k in spec.trust.verifier_keys
                            ],
                        }
                    ),
                    "suite": spec.suite
                    if spec.suite is None or spec.suite in BUILTIN_SUITES
                    else _relative_to(path.parent, spec.suite),
                }
            ),
            f"{path}: targets.{name}",
        )
    return specs


def _key_pem(path: str, where: str) -> str:
    """A trusted key file's public key, as PEM (one line naming the file when it is not one)."""
    from cryptography.hazmat.primitives import serialization

    from modelreg.signing import load_public_key

    try:
        key = load_public_key(Path(path))
    except InvalidInput as exc:
        raise InvalidInput(f"{where}: {exc.message}", exc.hint) from None
    return str(
        key.public_bytes(
            encoding=serialization.Encoding.PEM,
            format=serialization.PublicFormat.SubjectPublicKeyInfo,
        ).decode()
    )


def _embed(spec: _TargetSpec, where: str, *, read_files: bool = True) -> _TargetSpec:
    """``spec`` with the keys and suite its paths name read and stored in it: a key given by
    path and inline (``*_pems``) must be the same count; a suite file is read and validated
    (``suites.load_suite``). Unreadable: one line naming the target and the file."""
    trust = spec.trust
    update: dict[str, Any] = {}
    pems: dict[str, list[str]] = {}
    for kind in ("artifact", "verifier"):
        paths: list[str] = getattr(trust, f"{kind}_keys")
        given: list[str] = getattr(trust, f"{kind}_key_pems")
        if given and len(given) != len(paths) and paths:
            raise InvalidInput(
                f"{where}.trust: {len(paths)} {kind} key file(s) and {len(given)} inline PEM(s)",
                f"give the keys as files ({kind}_keys) or inline ({kind}_key_pems), not both",
            )
        if paths and (read_files or not given):
            pems[f"{kind}_key_pems"] = [_key_pem(p, f"{where}.trust") for p in paths]
        else:
            pems[f"{kind}_key_pems"] = [
                _checked_pem(pem, f"{where}.trust.{kind}_key_pems") for pem in given
            ]
    update["trust"] = trust.model_copy(update=pems)
    if (
        spec.suite is not None
        and spec.suite not in BUILTIN_SUITES
        and (spec.suite_content is None or read_files)
    ):
        from modelreg.suites import load_suite

        try:
            suite = load_suite(Path(spec.suite))
        except InvalidInput as exc:
            raise InvalidInput(f"{where}.suite: {exc.message}", exc.hint, step=exc.step) from None
        update["suite_content"] = suite.model_dump(mode="json")
    elif spec.suite_content is not None:
        from modelreg.suites import parse_suite

        parse_suite(spec.suite_content, f"{where}.suite_content")
    return spec.model_copy(update=update)


def _checked_pem(pem: str, where: str) -> str:
    from cryptography.hazmat.primitives import serialization

    from modelreg.signing import public_key_from_pem

    if len(pem) > MAX_KEY_PEM_CHARS:
        raise InvalidInput(f"{where}: a key of more than {MAX_KEY_PEM_CHARS} characters")
    key = public_key_from_pem(pem.encode(), where)
    return str(
        key.public_bytes(
            encoding=serialization.Encoding.PEM,
            format=serialization.PublicFormat.SubjectPublicKeyInfo,
        ).decode()
    )


def spec_as_json(spec: _TargetSpec) -> dict[str, Any]:
    """A definition as stored in the registry: JSON, defaults left out (so a later modelreg
    that adds an optional field reads the same definition the same way)."""
    return spec.model_dump(mode="json", exclude_defaults=True)


def spec_digest(data: dict[str, Any]) -> str:
    """The digest of a stored definition: sha256 of its canonical JSON (what the registry
    keeps with it and compares to tell a changed definition)."""
    import hashlib

    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


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
    _serving(Path(where), name, spec)
    # Keys and suites travel with the definition (checked here); one exported before they did
    # names paths only, read here when this host has them (``_embed``), refused otherwise.
    return spec_as_json(_embed(spec, f"{where}: target {name!r}", read_files=False))


def _target_from_spec(name: str, spec: _TargetSpec, origin: str) -> Target:
    memory = int(spec.memory_gib * GiB) if spec.memory_gib else None
    served = _runtime_fields(Path(f"target {name!r}"), name, spec)
    return Target(
        name=name,
        kind=spec.kind,
        description=spec.description or f"user-defined {spec.kind} target",
        memory_bytes=memory,
        cpu_flags=frozenset(spec.cpu_flags) if spec.cpu_flags is not None else None,
        neuron_cores=spec.neuron_cores,
        golden_prompts=tuple(spec.golden_prompts),
        origin=origin,
        hosts=tuple(spec.hosts),
        runtime={key: str(value) for key, value in spec.runtime.items()},
        swap_bytes=int(spec.swap_gib * GiB) if spec.swap_gib is not None else None,
        verify_timeout_seconds=spec.verify_timeout_seconds
        or DEFAULT_VERIFY_TIMEOUT_SECONDS[spec.kind],
        trust_artifact_keys=_trusted(spec.trust.artifact_keys, spec.trust.artifact_key_pems),
        trust_verifier_keys=_trusted(spec.trust.verifier_keys, spec.trust.verifier_key_pems),
        suite=spec.suite,
        suite_json=json.dumps(spec.suite_content, sort_keys=True)
        if spec.suite_content is not None
        else None,
        endpoint=served.endpoint,
        token_env=served.token_env,
        require_identity=served.require_identity,
        launch=served.launch,
        forbidden_flags=served.forbidden_flags,
        required_build_flags=served.required_build_flags,
        image=served.image,
        serving=_serving(Path(f"target {name!r}"), name, spec),
        # ``gates: {}`` declares nothing: the same definition as no block at all.
        gates=spec.gates if spec.gates is not None and spec.gates.declared else None,
        cost_per_hour_usd=spec.cost_per_hour_usd,
        license_policy=dict(spec.license_policy or {}),
        power_watts=spec.power_watts,
        reference=spec.reference,
        accept_forced=spec.accept_forced,
    )


def _trusted(labels: list[str], pems: list[str]) -> tuple[TrustedKey, ...]:
    """The keys of a stored definition. A definition stored before keys travelled with it
    names files only: each such key is kept with an empty PEM, which no signature verifies
    against (``judging.trust_policy`` reports it: nothing counts until it is applied again)."""
    if not pems:
        return tuple(TrustedKey(label, "") for label in labels)
    named = labels or [f"key {i + 1}" for i in range(len(pems))]
    return tuple(TrustedKey(label, pem) for label, pem in zip(named, pems, strict=True))


def all_targets(shared: dict[str, dict[str, Any]] | None = None) -> dict[str, Target]:
    """Built-in targets, then those defined in the registry (``shared``: name -> stored
    definition, origin "registry"). Nothing here depends on the host that asks: a targets file
    is applied to the registry (``targets apply``), never read beside it."""
    targets = dict(_BUILTIN)
    for name, data in (shared or {}).items():
        if name not in targets:  # a newer modelreg's built-in wins over a stored name
            targets[name] = _stored_target(name, json.dumps(data, sort_keys=True))
    return targets


@functools.lru_cache(maxsize=1024)
def _stored_target(name: str, text: str) -> Target:
    """A stored definition (canonical JSON) as a Target: a pure function of the text, worked
    out once per text (every read of a registry parses the same few definitions)."""
    data = json.loads(text)
    return replace(
        _target_from_spec(name, spec_from_json(name, data), SHARED_ORIGIN),
        spec_sha256=spec_digest(data),
    )


def targets_in_file(path: Path) -> dict[str, Target]:
    """The built-in targets and those a targets file defines, as applying it would define them
    (origin ``file:PATH``) — to read or check a file; no verdict reads one."""
    targets = all_targets()
    for name, spec in read_target_specs(path).items():
        if name in targets:
            raise InvalidInput(f"{path}: target {name!r} is built in and cannot be redefined")
        targets[name] = replace(
            _target_from_spec(name, spec, f"file:{path}"),
            spec_sha256=spec_digest(spec_as_json(spec)),
        )
    return targets


def get_target(name: str, path: Path | None = None) -> Target:
    """A built-in target, or one a targets file defines (``targets_in_file``)."""
    targets = targets_in_file(path) if path is not None else all_targets()
    if name not in targets:
        raise TargetNotFound(name, sorted(targets))
    return targets[name]
