"""The artifact manifest: exactly what was built, with the source of every number.

A manifest is immutable once recorded; its canonical JSON digest is the record's identity.
Values that could not be established are ``None`` with provenance ``unknown`` — never guessed —
and each such gap that matters for deployment is listed in ``hold_reasons``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from enum import Enum
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from modelreg.errors import InvalidInput, MovingReference
from modelreg.jsonio import read_json_file
from modelreg.limits import (
    LABEL_MAX,
    MAX_BITS_PER_WEIGHT,
    MAX_EXPERTS,
    MAX_LAYERS,
    MAX_MANIFEST_FILES,
    MODEL_ID_MAX,
    MODEL_ID_PART_MAX,
    bounded,
)

# The one grammar for model ids: ``org/name``, ASCII letters, digits and ``._-``, each part
# starting with a letter or digit and at most MODEL_ID_PART_MAX long (the Hub's own limit).
# \A…\Z, not ^…$: "$" also matches before a trailing newline, so "org/name\n" would pass.
from modelreg.schemas.neuron import NeuronFacts
from modelreg.schemas.sizes import (
    ByteCount,
    ExpertsOrPerLayer,
    IntOrPerLayer,
    Layers,
    Parameters,
    TensorCount,
    Tokens,
    Width,
    _known_groups,
)
from modelreg.textsafe import confusable_warning, for_terminal

# The one grammar for model ids: ``org/name``, ASCII letters, digits and ``._-``, each part
# starting with a letter or digit and at most MODEL_ID_PART_MAX long (the Hub's own limit).
# \A…\Z, not ^…$: "$" also matches before a trailing newline, so "org/name\n" would pass.

_MODEL_ID_PART = rf"[A-Za-z0-9][A-Za-z0-9._-]{{0,{MODEL_ID_PART_MAX - 1}}}"
MODEL_ID_RE = re.compile(rf"\A{_MODEL_ID_PART}/{_MODEL_ID_PART}\Z")
# A label a releaser gives a promotion (``promote --label release-14``); ``v`` (or ``V``) and
# digits alone read as a version number, and are never labels.
LABEL = rf"[A-Za-z0-9][A-Za-z0-9._-]{{0,{LABEL_MAX - 1}}}"
LABEL_RE = re.compile(rf"\A{LABEL}\Z")
VERSION_LIKE_RE = re.compile(r"\A[vV][0-9]+\Z")
# A record's handle: its model and the version number it was given at add (``acme/chat@v3``),
# or a label one of its promotions was given (``acme/chat@release-14``).
HANDLE = rf"{_MODEL_ID_PART}/{_MODEL_ID_PART}@(v[0-9]{{1,9}}|{LABEL})"
HANDLE_RE = re.compile(
    rf"\A(?P<model>{_MODEL_ID_PART}/{_MODEL_ID_PART})@"
    rf"(?:v(?P<version>[0-9]{{1,9}})|(?P<label>{LABEL}))\Z"
)
SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
_HF_PIN_RE = re.compile(r"^hf://(?P<repo>[^/@\s]+/[^/@\s]+)@(?P<rev>[0-9a-f]{40})$")
_HF_ANY_RE = re.compile(r"^hf://(?P<repo>[^/@\s]+/[^/@\s]+)(?:@(?P<rev>\S*))?$")
_PYPI_PIN_RE = re.compile(
    r"^pypi://(?P<pkg>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<ver>[A-Za-z0-9.+!_-]+)$"
)
_PROVENANCE_RE = re.compile(r"^(tensors|config|unknown|declared:\S.*)$")

Provenance = Annotated[str, Field(pattern=_PROVENANCE_RE.pattern)]
Sha256 = Annotated[str, Field(pattern=SHA256_RE.pattern)]
# GGUF metadata digests kept per key (``GGUFFacts.metadata_sha256``): bounded wherever a
# manifest comes from — built here, POSTed, imported or read from a file.
MAX_METADATA_DIGESTS = 1000
MAX_METADATA_KEY_CHARS = 256


def parse_source_pin(source: str) -> str:
    """Return ``source`` if it is an immutable pin, else raise ``MovingReference``.

    Accepted: ``hf://org/name@<40-hex commit>``, ``pypi://package==version``,
    ``sha256:<64-hex>``. Branches, tags, ``latest`` and bare names move, so they are refused
    with the form that would pin them.
    """
    source = source.strip()
    if _HF_PIN_RE.match(source) or _PYPI_PIN_RE.match(source):
        return source
    if source.startswith("sha256:") and SHA256_RE.match(source.removeprefix("sha256:")):
        return source
    hf = _HF_ANY_RE.match(source)
    if hf:
        rev = hf.group("rev")
        what = f"revision {rev!r} can move" if rev else "no revision given"
        raise MovingReference(
            source, f"{what}; pin the 40-hex commit: hf://{hf.group('repo')}@<commit sha>"
        )
    if source.startswith("pypi://"):
        raise MovingReference(source, "pin an exact version: pypi://package==1.2.3")
    if source.startswith("sha256:"):
        raise MovingReference(source, "a sha256 pin is 'sha256:' followed by 64 lowercase hex")
    raise MovingReference(
        source,
        "use hf://org/name@<40-hex commit>, pypi://package==version or sha256:<64-hex>",
    )


# An immutable revision of a base model: a Hub commit (40 hex) or the sha256 of its weights.
BASE_REVISION_RE = re.compile(r"\A(?:[0-9a-f]{40}|sha256:[0-9a-f]{64})\Z")
BASE_REVISION_FORMS = "<40-hex commit> or @sha256:<64-hex of its weights>"


def parse_base_model(text: str) -> tuple[str, str | None]:
    """``org/name@<revision>`` (or ``org/name``, revision unknown) as (model id, revision).

    The revision is immutable or refused: a 40-hex commit or ``sha256:<64-hex>``; a branch,
    tag or short hash can point at other weights tomorrow.
    """
    model_id, at, revision = text.strip().partition("@")
    parse_model_id(model_id)
    if not at:
        return model_id, None
    if BASE_REVISION_RE.match(revision.lower()):
        return model_id, revision.lower()
    raise InvalidInput(
        f"`base_model` {for_terminal(text[:200])!r}: revision {for_terminal(revision[:80])!r} "
        "can move or is not a revision",
        f"pin it: `base_model` {model_id}@{BASE_REVISION_FORMS}",
    )


def is_model_id(value: str) -> bool:
    """Is ``value`` exactly ``org/name`` under the one model-id grammar (whole string)?"""
    return MODEL_ID_RE.fullmatch(value) is not None


def model_id_problem(value: str, what: str = "model id") -> str:
    """Why ``value`` is not a model id, in one line that quotes it escaped and says why it may
    look valid (look-alike letters, invisible characters, a trailing newline)."""
    shown = for_terminal(value[:120]) + ("…" if len(value) > 120 else "")
    why = ""
    warning = confusable_warning(value)
    if warning:
        why = f"; it {warning}"
    elif value != value.strip():
        why = "; it has leading or trailing whitespace"
    elif len(value) > MODEL_ID_MAX or any(len(p) > MODEL_ID_PART_MAX for p in value.split("/")):
        why = f"; it is {len(value)} characters long"
    return (
        f"{what} '{shown}' must be the exact 'org/name' (ASCII letters, digits, '.', '_', '-'; "
        f"each part at most {MODEL_ID_PART_MAX} characters), e.g. google/gemma-3-270m{why}"
    )


def parse_model_id(model_id: str) -> str:
    """Return ``model_id`` if it is exactly ``org/name`` (see ``MODEL_ID_RE``), else raise a
    one-line ``InvalidInput`` saying why."""
    if not is_model_id(model_id):
        raise InvalidInput(model_id_problem(model_id))
    return model_id


class Count(BaseModel):
    """A parameter count and where it came from. Unknown is ``value=None``."""

    model_config = ConfigDict(extra="forbid")

    value: Parameters | None = Field(default=None, ge=0)
    provenance: Provenance = "unknown"

    @model_validator(mode="after")
    def _unknown_has_no_value(self) -> Count:
        if (self.value is None) != (self.provenance == "unknown"):
            raise ValueError("a count is unknown exactly when its provenance is 'unknown'")
        return self

    @classmethod
    def unknown(cls) -> Count:
        return cls()


class ParameterGroups(BaseModel):
    """Parameters per group of the language model, and where the split came from."""

    model_config = ConfigDict(extra="forbid")

    counts: dict[str, Parameters]
    provenance: Provenance

    @field_validator("counts")
    @classmethod
    def _known_and_counted(cls, value: dict[str, int]) -> dict[str, int]:
        _known_groups(value)
        if any(n < 0 for n in value.values()):
            raise ValueError("a parameter group count cannot be negative")
        return value


class ParameterLedger(BaseModel):
    """Total, non-embedding, active and effective parameters, kept apart ("E" is not "A")."""

    model_config = ConfigDict(extra="forbid")

    total: Count = Field(default_factory=Count.unknown)
    non_embedding: Count = Field(default_factory=Count.unknown)
    active: Count = Field(default_factory=Count.unknown)
    effective: Count = Field(default_factory=Count.unknown)
    # Per-group split (from a config: tensors keep theirs in quantization.groups). A Neuron fit
    # checks that the bundle's resident modules cover every group.
    groups: ParameterGroups | None = None


class License(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str | None = None
    source: str = "unknown"  # "cli", "gguf:general.license", "card:<path>", "unknown"

    @field_validator("id")
    @classmethod
    def _normalise(cls, value: str | None) -> str | None:
        return value.strip().lower() if value else None


# "server": the script a published bundle serves with; "container": its Dockerfile. Both
# change behaviour, so both are digested like weights.
FileRole = Literal[
    "weights", "config", "tokenizer", "chat_template", "server", "container", "other"
]


class FileEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str
    # None only in hand-written reference manifests of builds we do not hold: unknown.
    bytes: ByteCount | None = Field(default=None, ge=0)
    sha256: Sha256 | None = None
    role: FileRole = "weights"

    @field_validator("path")
    @classmethod
    def _relative_inside_root(cls, value: str) -> str:
        parts = value.split("/")
        if value.startswith("/") or "\\" in value or ".." in parts or "" in parts:
            raise ValueError(f"file path {value!r} must be relative, '/'-separated, without '..'")
        return value


class TensorStats(BaseModel):
    """Tensors, parameters and bytes of one tensor type or group; bytes unknown if any are."""

    model_config = ConfigDict(extra="forbid")

    tensors: TensorCount = 0
    params: Parameters = 0
    bytes: ByteCount | None = 0
    bits_per_weight: Annotated[float | None, bounded(MAX_BITS_PER_WEIGHT, "bits")] = None


# Tensor types that are not quantized (GGUF names; safetensors dtypes use the same spellings).
FULL_PRECISION_TYPES = frozenset({"F64", "F32", "F16", "BF16"})


class QuantRecipe(BaseModel):
    """How the artifact was quantized, as declared by whoever ran the quantizer.

    ``add`` checks the claims the tensors can contradict (``manifests/recipe.py``): the scheme
    against the per-tensor types, the group size against the format's block size, excluded
    tensors against the tensors kept at higher precision, the importance matrix against the
    one a GGUF records.
    """

    model_config = ConfigDict(extra="forbid")

    tool: str | None = None
    tool_revision: str | None = None
    # llama.cpp file type (Q4_K_M, Q8_0, IQ4_XS…) for GGUF; the method otherwise (GPTQ, fp8…).
    scheme: str | None = None
    group_size: Width | None = Field(default=None, gt=0)
    importance_matrix_sha256: Sha256 | None = None
    # The importance matrix's file name, and the calibration text it was computed on, as the
    # quantizer was given them (a GGUF records both: quantize.imatrix.file / .dataset).
    importance_matrix_file: str | None = None
    calibration_set: str | None = None
    calibration_set_sha256: Sha256 | None = None
    # Tensor names (or glob patterns) kept out of the scheme, at higher precision.
    excluded_tensors: list[str] = Field(default_factory=list)
    # The tensor type the quantizer read (F16, BF16, F32 — or a quantized type when
    # requantizing), and llama-quantize's --allow-requantize: requantizing an already
    # quantized file can lose far more quality than quantizing from 16 or 32 bits.
    source_type: str | None = None
    allow_requantize: bool | None = None
    notes: str | None = None

    @model_validator(mode="after")
    def _requantize_is_declared(self) -> QuantRecipe:
        if self.allow_requantize is False and self.requantized:
            raise ValueError(
                f"source_type {self.source_type} is already quantized: quantizing it again "
                "needs --allow-requantize (allow_requantize: true)"
            )
        return self

    @property
    def requantized(self) -> bool | None:
        """Was an already quantized tensor quantized again? None: the recipe does not say."""
        if self.source_type is not None:
            return self.source_type.strip().upper() not in FULL_PRECISION_TYPES
        return True if self.allow_requantize else None


class ImportanceMatrix(BaseModel):
    """The importance matrix a quantizer used, as the artifact itself records it (llama.cpp's
    llama-quantize writes ``quantize.imatrix.*`` into every GGUF it quantizes with one)."""

    model_config = ConfigDict(extra="forbid")

    file: str | None = None
    dataset: str | None = None
    entries_count: TensorCount | None = Field(default=None, ge=0)
    chunks_count: TensorCount | None = Field(default=None, ge=0)
    source: str = "gguf:quantize.imatrix.*"


class Quantization(BaseModel):
    """What the bits really are: a 'Q4' file is not 4.000 bits per weight."""

    model_config = ConfigDict(extra="forbid")

    nominal_file_type: str | None = None
    tensor_types: dict[str, TensorStats] = Field(default_factory=dict)
    groups: dict[str, TensorStats] = Field(default_factory=dict)
    bits_per_weight: Annotated[float | None, bounded(MAX_BITS_PER_WEIGHT, "bits")] = None
    higher_precision_tensors: list[str] = Field(default_factory=list)
    recipe: QuantRecipe | None = None
    # For each of the recipe's excluded_tensors, the types of the tensors it names in the
    # artifact ({} when it names none): what the recipe check compares.
    excluded_tensor_types: dict[str, dict[str, int]] = Field(default_factory=dict)
    importance_matrix: ImportanceMatrix | None = None


class ArchitectureFacts(BaseModel):
    """Shape facts read from the artifact's metadata or config (``None`` when absent)."""

    model_config = ConfigDict(extra="forbid")

    architecture: str | None = None
    name: str | None = None
    size_label: str | None = None
    context_length: Tokens | None = None
    block_count: Layers | None = None
    embedding_length: Width | None = None
    feed_forward_length: IntOrPerLayer = None
    head_count: IntOrPerLayer = None
    head_count_kv: IntOrPerLayer = None
    key_length: IntOrPerLayer = None
    value_length: IntOrPerLayer = None
    sliding_window: Tokens | None = None
    sliding_window_pattern: list[bool] | None = Field(default=None, max_length=MAX_LAYERS)
    # The last N layers reuse the KV cache of an earlier layer (Gemma 3n, Gemma 4
    # num_kv_shared_layers): they hold no cache of their own.
    kv_shared_layers: Layers | None = Field(default=None, ge=0)
    # Multi-head latent attention (DeepSeek-V2/V3, GLM-5…): the width of the compressed KV
    # latent, and the rotary part of each key head (qk_rope_head_dim; recorded only beside
    # kv_lora_rank).
    kv_lora_rank: Width | None = Field(default=None, ge=1)
    rope_dimension_count: Width | None = Field(default=None, ge=0)
    # The per-head K/V sizes after decompression. A GGUF carries them only when it stores
    # attention as the latent (llama.cpp's converter since its MLA support: key_length is then
    # kv_lora_rank + rope dims with one KV head); their absence means K/V per head.
    key_length_mla: Width | None = Field(default=None, ge=1)
    value_length_mla: Width | None = Field(default=None, ge=1)
    expert_count: Annotated[int | None, bounded(MAX_EXPERTS, "experts")] = None
    expert_used_count: ExpertsOrPerLayer = None
    vocab_size: Width | None = None
    tied_embeddings: bool | None = None
    chat_template_sha256: Sha256 | None = None
    source: str | None = None  # where these facts were read: "gguf metadata", a config URL…


class LabelFinding(BaseModel):
    model_config = ConfigDict(extra="forbid")

    claim: str  # "total", "active", "effective", "experts"
    label_value: int | None
    ledger_value: int | None
    deviation: float | None = None
    consistent: bool | None = None  # None: cannot tell (ledger value unknown)
    message: str


class LabelCheck(BaseModel):
    """The outcome of checking one size label against the parameter ledger."""

    model_config = ConfigDict(extra="forbid")

    label: str
    source: str  # "gguf:general.size_label", "model_id", "card:…"
    tolerance: float = 0.10
    findings: list[LabelFinding] = Field(default_factory=list)

    @property
    def problems(self) -> list[str]:
        return [f.message for f in self.findings if f.consistent is not True]


class GGUFFacts(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: Width
    alignment: Width
    tensor_count: TensorCount
    kv_count: TensorCount
    split_count: TensorCount = 1
    file_type_id: Width | None = None
    quantization_version: Width | None = None
    # sha256 of the tensor data region (of a split set: of the shards' region digests, in
    # order). Equal tensor data with different files means a metadata-only edit.
    tensor_data_sha256: Sha256 | None = None
    # sha256 over the raw tokenizer.ggml.* key/values (vocabulary, merges, special tokens).
    tokenizer_sha256: Sha256 | None = None
    # Each metadata key -> sha256 of its raw key/value bytes (the first shard's), so that a
    # diff names the keys a metadata-only edit changed. None: not recorded (a record added
    # before modelreg kept them, or a file with more keys than MAX_METADATA_DIGESTS). Derived
    # from bytes the files' sha256 already identify: not part of the record's identity.
    metadata_sha256: (
        dict[Annotated[str, Field(max_length=MAX_METADATA_KEY_CHARS)], Sha256] | None
    ) = Field(default=None, max_length=MAX_METADATA_DIGESTS)


class RuntimeRequirements(BaseModel):
    model_config = ConfigDict(extra="forbid")

    runtime: Literal["llama.cpp", "transformers", "neuron"]
    # CPU features the artifact itself needs beyond what the runtime build needs (e.g. a
    # repacked _R8 layout that only has AVX2 kernels). Empty means none declared.
    cpu_features: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


class GoldenPrompt(BaseModel):
    """A smoke-test prompt and the text the answer must contain."""

    model_config = ConfigDict(extra="forbid")

    prompt: str = Field(min_length=1)
    expect: str = Field(default="Paris", min_length=1)
    chat: bool | None = None  # None: use the chat template when the artifact has one


FindingCode = Literal["unsafe_template", "unsafe_pickle", "identity_mismatch", "hidden_text"]


class Finding(BaseModel):
    """What a scan of the artifact's bytes found (``modelreg.safety``): a chat template that
    reaches Python internals or gates instructions on message text, a pickle importing what is
    not a tensor type, a name contradicting the record, invisible or bidirectional characters.
    Judged from the bytes at add, so stored with the record (every reader sees the same
    holds), never part of its identity."""

    model_config = ConfigDict(extra="forbid")

    code: FindingCode
    file: str  # the file's path in the artifact
    where: str | None = None  # the metadata key, template name or archive member
    message: str
    line: int | None = Field(default=None, ge=1)  # a template's line
    excerpt: str | None = None  # that line (cut)
    # False: reported, holds nothing (hidden characters in a card). A template that cannot
    # be parsed holds as unknown, not as unsafe.
    holds: bool = True
    unknown: bool = False


class Manifest(BaseModel):
    """Everything recorded about one artifact at ``modelreg add``."""

    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1] = 1
    model_id: str | None = None
    source: str | None = None
    license: License = Field(default_factory=License)
    format: Literal["gguf", "safetensors", "neuron"]
    files: list[FileEntry] = Field(min_length=1, max_length=MAX_MANIFEST_FILES)
    parameters: ParameterLedger = Field(default_factory=ParameterLedger)
    quantization: Quantization | None = None
    architecture: ArchitectureFacts = Field(default_factory=ArchitectureFacts)
    gguf: GGUFFacts | None = None
    neuron: NeuronFacts | None = None
    base_model: str | None = None
    # The base model's immutable revision (BASE_REVISION_RE): what a quantized artifact was
    # made from. None: unknown, which holds a quantized record (provenance_unknown).
    base_model_revision: str | None = None
    # The size label the artifact's model card names (front matter model_name, else its first
    # heading), checked against the tensors like the model id's.
    card_size_label: str | None = None
    runtime: RuntimeRequirements
    golden_prompts: list[GoldenPrompt] = Field(default_factory=list)
    # Every size label the artifact carries, each checked against the ledger (holds.py).
    label_checks: list[LabelCheck] = Field(default_factory=list)
    # What the safety scans found in the bytes (templates, pickles, names, text), and files
    # beside the artifact a runtime would load that the record does not hold: both judged at
    # add and turned into holds by holds.py, whatever else is declared later.
    findings: list[Finding] = Field(default_factory=list)
    unrecorded_files: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    hold_reasons: list[str] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _legacy_label_check(cls, data: object) -> object:
        # Records made before label_checks kept one check, the first label found, in
        # label_check.
        if isinstance(data, dict) and "label_check" in data:
            data = dict(data)
            legacy = data.pop("label_check")
            if legacy is not None and not data.get("label_checks"):
                data["label_checks"] = [legacy]
        return data

    @property
    def label_check(self) -> LabelCheck | None:
        """The first size-label check: the artifact's own label when it has one."""
        return self.label_checks[0] if self.label_checks else None

    @field_validator("model_id", "base_model")
    @classmethod
    def _org_slash_name(cls, value: str | None) -> str | None:
        if value is not None and not is_model_id(value):
            raise ValueError(model_id_problem(value))
        return value

    @field_validator("base_model_revision")
    @classmethod
    def _immutable_revision(cls, value: str | None) -> str | None:
        if value is not None and not BASE_REVISION_RE.match(value):
            raise ValueError(
                f"base model revision {value[:80]!r} must be a 40-hex commit or sha256:<64-hex>"
            )
        return value

    @model_validator(mode="after")
    def _revision_of_a_base(self) -> Manifest:
        if self.base_model_revision is not None and self.base_model is None:
            raise ValueError("base_model_revision is given without base_model")
        return self

    @field_validator("source")
    @classmethod
    def _pinned(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            return parse_source_pin(value)
        except MovingReference as exc:
            raise ValueError(str(exc)) from None

    @field_validator("files")
    @classmethod
    def _unique_paths(cls, value: list[FileEntry]) -> list[FileEntry]:
        paths = [f.path for f in value]
        if len(set(paths)) != len(paths):
            raise ValueError("file paths must be unique")
        return value

    def canonical_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))

    def digest(self) -> str:
        """sha256 of the canonical JSON of everything stored, judgments included."""
        return hashlib.sha256(self.canonical_json().encode()).hexdigest()

    def identity_digest(self) -> str:
        """sha256 of the artifact's facts only: identity, source, license, files, ledger,
        quantization, architecture, runtime requirements, golden prompts.

        Judgments about the facts (hold reasons, the size-label verdict, notes) are left out,
        so rewording a message never makes the same artifact a new record; fields left at
        their defaults are left out too, so a later modelreg that learns a new optional fact
        still gives an artifact that does not have it the same identity.
        """
        facts = self.model_dump(mode="json", exclude=IDENTITY_EXCLUDED, exclude_defaults=True)
        canonical = json.dumps(facts, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()

    @property
    def record_id(self) -> str:
        return record_id_for(self.identity_digest())


# What the manifest says *about* the facts: stored with it, never part of its identity.
JUDGMENT_FIELDS = frozenset(
    {"hold_reasons", "label_checks", "notes", "findings", "unrecorded_files"}
)
# Left out of the identity digest: the judgments, and digests of parts of bytes the files'
# sha256 already identify (the same bytes are the same record, whichever modelreg added them).
IDENTITY_EXCLUDED: dict[str, Any] = {
    **dict.fromkeys(JUDGMENT_FIELDS, True),
    "gguf": {"metadata_sha256": True},
}


def record_id_for(identity_digest: str) -> str:
    """Short, stable record id derived from the identity digest (records added before
    identity digests existed keep the id their whole-manifest digest gave them)."""
    return "r_" + identity_digest[:12]


def first_error(exc: ValidationError, whole: str = "value") -> str:
    """pydantic's report as one line: ``field.path: message`` of its first error."""
    first = exc.errors()[0]
    loc = ".".join(str(p) for p in first["loc"]) or whole
    return f"{loc}: {first['msg']}"


def accepted_keys(model: type[BaseModel], loc: Sequence[str | int]) -> dict[str, list[str]] | None:
    """The keys the block at ``loc`` (a pydantic error's location, without the offending key)
    accepts when that block is a model, in order, each with its values when it is an enum:
    ``{"mode": ["contains", "exact", …], "value": [], …}`` for a suite's ``cases.0.expect``."""
    annotation: Any = model
    for part in loc:
        block = _model_of(annotation)
        if isinstance(part, str) and block is not None and part in block.model_fields:
            annotation = block.model_fields[part].annotation
        else:  # an index into a list or a key of a mapping: the type of its items
            args = get_args(_without_none(annotation))
            if not args:
                return None
            annotation = args[-1]
    block = _model_of(annotation)
    if block is None:
        return None
    keys = {}
    for name, field in block.model_fields.items():
        kind = _without_none(field.annotation)
        is_enum = isinstance(kind, type) and issubclass(kind, Enum)
        keys[name] = [str(m.value) for m in kind] if is_enum else []
    return keys


def _without_none(annotation: Any) -> Any:
    """``X`` of ``X | None`` (and of ``Annotated[X, …]``)."""
    if get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    if isinstance(annotation, UnionType) or get_origin(annotation) is Union:
        rest = [a for a in get_args(annotation) if a is not type(None)]
        return rest[0] if len(rest) == 1 else annotation
    return annotation


def _model_of(annotation: Any) -> type[BaseModel] | None:
    annotation = _without_none(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def load_manifest(data: dict[str, object], *, origin: str) -> Manifest:
    """Validate untrusted manifest data, turning pydantic's report into one-line input errors."""
    try:
        return Manifest.model_validate(data)
    except ValidationError as exc:
        raise InvalidInput(f"{origin}: {first_error(exc, 'manifest')}") from None


MAX_MANIFEST_BYTES = 16 << 20


def read_manifest_file(path: Path) -> Manifest:
    """A manifest from a JSON file (a reference manifest, an export); one-line errors."""
    data = read_json_file(path, max_bytes=MAX_MANIFEST_BYTES, what="manifest")
    if not isinstance(data, dict):
        raise InvalidInput(f"{path}: a manifest is a JSON object")
    return load_manifest(data, origin=str(path))
