"""Turn artifact files on disk into a ``Manifest`` (no database involved)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from modelreg.errors import InvalidArtifact, InvalidInput
from modelreg.manifests.digest import (
    ProgressCallback,
    sha256_files,
    sha256_files_and_regions,
)
from modelreg.manifests.gguf import (
    read_gguf,
)
from modelreg.manifests.gguf_facts import (
    _int,
    _metadata_digests,
    _str,
    architecture_from_gguf,
    base_bits_per_weight,
    gguf_file_type_name,
    importance_matrix_from_gguf,
)
from modelreg.manifests.hf import (
    CARD_FILE,
    check_against_blobs,
    file_role,
    read_card,
    resolve_hub_source,
    unrecorded_runtime_files,
)
from modelreg.manifests.hf_config import (
    architecture_from_config,
    ledger_from_config,
    parameters_from_config,
    read_json_object,
    text_config,
)
from modelreg.manifests.holds import finalize
from modelreg.manifests.ledger import (
    TensorEntry,
    classify_gguf_tensor,
    classify_hf_tensor,
    compute_ledger,
    gguf_layer_of,
    hf_layer_of,
    summarize_quantization,
)
from modelreg.manifests.neuron import (
    bundle_file_role,
    bundle_files,
    is_neuron_bundle,
    read_bundle,
)
from modelreg.manifests.recipe import excluded_tensor_types
from modelreg.safety.scan import directory_findings, gguf_findings
from modelreg.schemas.manifest import (
    MODEL_ID_RE,
    ArchitectureFacts,
    Count,
    FileEntry,
    GGUFFacts,
    GoldenPrompt,
    License,
    Manifest,
    ParameterLedger,
    Quantization,
    QuantRecipe,
    RuntimeRequirements,
    first_error,
    parse_base_model,
    parse_model_id,
    parse_source_pin,
)
from modelreg.schemas.neuron import HostRun


@dataclass(frozen=True)
class BuiltArtifact:
    """A manifest and where its files are on this machine (``root / file.path``)."""

    manifest: Manifest
    root: Path
    # How the source was resolved (e.g. a branch to its commit): kept in the add event, not in
    # the manifest, so that @main and @<commit> of the same files are the same record.
    resolution: dict[str, str] | None = None


@dataclass(frozen=True)
class BuildRequest:
    """What the caller knows about an artifact beyond its files, for every format's builder."""

    model_id: str | None = None
    source: str | None = None
    license_id: str | None = None
    golden_prompts: Sequence[GoldenPrompt] = ()
    recipe: QuantRecipe | None = None
    effective: Count | None = None
    trust_cache: bool = False
    # False: files are not hashed (their sha256 and the GGUF tensor-data digest unknown) — a
    # description for what needs only the artifact's shape, as fit, never a record.
    digest: bool = True
    progress: ProgressCallback | None = None
    on_hashing: Any = None
    # Totals published elsewhere (a model card, a paper), for artifacts whose own files do not
    # say enough: recorded with provenance ``declared:<params_source>``.
    total_params: int | None = None
    active_params: int | None = None
    params_source: str | None = None
    # Host memory / time a Neuron bundle's compile and deploy took, when the bundle does not
    # state them itself (a bundle as published); each with its source.
    compile_host: HostRun | None = None
    deploy_host: HostRun | None = None


# Real GGUF files carry tens of metadata keys with names of tens of characters: a file with
# more, or longer, keeps no per-key digests (MAX_METADATA_DIGESTS, MAX_METADATA_KEY_CHARS: the
# schema's bounds, so a manifest stays small whatever a file holds).
# A declared count may differ from the artifact's own count by rounding only ("25.2B").
DECLARED_COUNT_TOLERANCE = 0.05
MAX_PARAMS_SOURCE_CHARS = 500


def declare_counts(
    ledger: ParameterLedger,
    *,
    total: int | None,
    active: int | None,
    source: str | None,
) -> tuple[ParameterLedger, list[str]]:
    """The ledger with declared total / active parameters filled in where it knows none.

    Where the artifact's own count (tensors or config) is known, it stays: a declaration that
    agrees within DECLARED_COUNT_TOLERANCE is noted, one that contradicts it is bad input.
    """
    if total is None and active is None:
        if source is not None:
            raise InvalidInput(
                f"`params_source` {source!r} given without `total_params` or `active_params`"
            )
        return ledger, []
    if source is None or not source.strip():
        raise InvalidInput(
            "`total_params` / `active_params` need `params_source` (a URL): where the number was "
            "published (e.g. the model card)"
        )
    source = source.strip()
    if len(source) > MAX_PARAMS_SOURCE_CHARS or any(c in source for c in "\r\n\t"):
        raise InvalidInput(
            f"--params-source {source[:60]!r}: give one line of at most "
            f"{MAX_PARAMS_SOURCE_CHARS} characters (a URL)"
        )
    provenance = f"declared:{source}"
    updated = ledger.model_copy(deep=True)
    notes = []
    for name, value in (("total", total), ("active", active)):
        if value is None:
            continue
        if value <= 0:
            raise InvalidInput(f"--{name}-params {value} must be a positive parameter count")
        current: Count = getattr(updated, name)
        if current.value is None:
            setattr(updated, name, Count(value=value, provenance=provenance))
            continue
        deviation = abs(value - current.value) / current.value if current.value else 1.0
        if deviation > DECLARED_COUNT_TOLERANCE:
            raise InvalidInput(
                f"--{name}-params {value:,} contradicts the artifact's own count "
                f"{current.value:,} ({current.provenance}), {deviation:.1%} apart — drop "
                f"--{name}-params or fix the artifact"
            )
        notes.append(
            f"declared {name} parameters {value:,} ({source}) agree with the "
            f"{current.provenance} count {current.value:,} ({deviation:.1%} apart)"
        )
    if (
        updated.total.value is not None
        and updated.active.value is not None
        and updated.active.value > updated.total.value
    ):
        raise InvalidInput(
            f"active parameters {updated.active.value:,} exceed total "
            f"{updated.total.value:,}: check `active_params` / `total_params`"
        )
    return updated, notes


def build_manifest(
    paths: Sequence[Path | str],
    *,
    model_id: str | None = None,
    source: str | None = None,
    license_id: str | None = None,
    golden_prompts: Sequence[GoldenPrompt] = (),
    recipe: QuantRecipe | None = None,
    effective: Count | None = None,
    base_model: str | None = None,
    trust_cache: bool = False,
    digest: bool = True,
    progress: ProgressCallback | None = None,
    on_hashing: Any = None,
    total_params: int | None = None,
    active_params: int | None = None,
    params_source: str | None = None,
    compile_host: HostRun | None = None,
    deploy_host: HostRun | None = None,
) -> BuiltArtifact:
    """Read, digest and describe the artifact made of ``paths``.

    Everything is checked before anything is hashed, so bad input fails fast. ``on_hashing``
    is called with the total number of bytes about to be hashed (for a progress display).
    ``total_params`` / ``active_params`` with ``params_source`` declare counts the artifact
    cannot establish itself (provenance ``declared:<params_source>``); ``compile_host`` /
    ``deploy_host`` declare a Neuron bundle's measured host peaks when it states none.
    ``base_model`` is ``org/name@<revision>`` (a 40-hex commit or ``sha256:<64-hex>``) or
    ``org/name``, revision unknown: what a quantized artifact was made from. ``digest=False``
    reads the artifact without hashing it: every sha256 unknown (held for it), for what needs
    only its shape.
    """
    if not paths:
        raise InvalidInput("no artifact path given")
    if model_id is not None:
        model_id = parse_model_id(model_id)
    base_revision = None
    if base_model is not None:
        base_model, base_revision = parse_base_model(base_model)
    # Checked before hashing: a bad declaration fails fast.
    declare_counts(
        ParameterLedger(), total=total_params, active=active_params, source=params_source
    )
    built = _build_checked(
        paths,
        BuildRequest(
            model_id=model_id,
            source=source,
            license_id=license_id,
            golden_prompts=tuple(golden_prompts),
            recipe=recipe,
            effective=effective,
            trust_cache=trust_cache,
            digest=digest,
            progress=progress,
            on_hashing=on_hashing,
            total_params=total_params,
            active_params=active_params,
            params_source=params_source,
            compile_host=compile_host,
            deploy_host=deploy_host,
        ),
    )
    manifest = built.manifest
    if total_params is not None or active_params is not None:
        ledger, notes = declare_counts(
            manifest.parameters, total=total_params, active=active_params, source=params_source
        )
        manifest = finalize(
            manifest.model_copy(update={"parameters": ledger, "notes": manifest.notes + notes})
        )
    if base_model is not None:
        if manifest.base_model not in (None, base_model):
            raise InvalidInput(
                f"`base_model` {base_model} contradicts the artifact's base model "
                f"{manifest.base_model} — drop `base_model` or fix the artifact"
            )
        manifest = finalize(
            manifest.model_copy(
                update={"base_model": base_model, "base_model_revision": base_revision}
            )
        )
    return BuiltArtifact(manifest, built.root, built.resolution)


def _build_checked(paths: Sequence[Path | str], req: BuildRequest) -> BuiltArtifact:
    """``_build_any``, with a fact beyond the manifest schema's limits (a GGUF or config that
    names 2,147,483,648 layers) one line of bad input naming the field and its limit."""
    from pydantic import ValidationError

    try:
        return _build_any(paths, req)
    except ValidationError as exc:
        # A part built on its own names its fields from the part: say where it sits.
        section = _SECTIONS.get(exc.title)
        problem = first_error(exc)
        raise InvalidArtifact(
            str(paths[0]), f"{section}.{problem}" if section else problem
        ) from None


_SECTIONS = {
    "ArchitectureFacts": "architecture",
    "GGUFFacts": "gguf",
    "Quantization": "quantization",
    "ImportanceMatrix": "quantization.importance_matrix",
    "NeuronFacts": "neuron",
}


def _build_any(paths: Sequence[Path | str], req: BuildRequest) -> BuiltArtifact:
    if req.source is not None:
        req = replace(req, source=parse_source_pin(req.source))
    hub = [str(p) for p in paths if str(p).startswith("hf://")]
    if hub:
        if len(paths) > 1:
            raise InvalidInput("give one hf://org/name@REV per add, without other paths")
        return _build_from_hub(hub[0], req)
    resolved = [Path(p).expanduser().resolve() for p in paths]
    for p in resolved:
        if not p.exists():
            raise InvalidArtifact(p, "file not found")
    bundles = [p for p in resolved if p.is_dir() and is_neuron_bundle(p)]
    if (req.compile_host or req.deploy_host) and not bundles:
        raise InvalidInput(
            f"{resolved[0]}: compile / deploy host runs describe a Neuron bundle; this is not one"
        )
    if bundles:
        if len(resolved) > 1:
            raise InvalidInput("give one Neuron bundle directory per add")
        return _build_neuron(bundles[0], req)
    checkpoint_dirs = {
        p if p.is_dir() else p.parent for p in resolved if p.is_dir() or p.suffix == ".safetensors"
    }
    if checkpoint_dirs:
        if len(checkpoint_dirs) > 1 or (len(resolved) > 1 and any(p.is_dir() for p in resolved)):
            raise InvalidInput("give one checkpoint directory per add")
        return _build_safetensors(checkpoint_dirs.pop(), req)
    ggufs = [p for p in resolved if p.is_file() and p.suffix == ".gguf"]
    if ggufs:
        return _build_gguf(resolved, req)
    raise InvalidInput(
        f"{resolved[0]}: not a recognised artifact (expected a .gguf file, a safetensors "
        "checkpoint directory or hf://org/name@REV)"
    )


def _resolve_license(
    artifact_license: str | None, cli_license: str | None, where: str = "gguf:general.license"
) -> License:
    if cli_license and artifact_license and cli_license.lower() != artifact_license.lower():
        raise InvalidInput(
            f"`license_id` {cli_license!r} contradicts the artifact's license "
            f"{artifact_license!r} ({where}) — drop `license_id` or fix the artifact"
        )
    if artifact_license:
        return License(id=artifact_license, source=where)
    if cli_license:
        return License(id=cli_license, source="cli")
    return License()


def _build_gguf(paths: list[Path], req: BuildRequest) -> BuiltArtifact:
    if len(paths) > 1 and not all(p.suffix == ".gguf" for p in paths):
        raise InvalidInput("a GGUF artifact is .gguf files only; give one artifact per add")
    header = read_gguf(paths[0])
    extra = set(paths) - set(header.paths)
    if extra:
        raise InvalidInput(
            f"{sorted(extra)[0]} is not part of {paths[0].name}'s split set; "
            "give one artifact per add"
        )
    root = header.paths[0].parent
    entries = [
        TensorEntry(t.name, t.n_elements, t.type_name, t.n_bytes, len(t.shape))
        for t in header.tensors
    ]
    arch = architecture_from_gguf(header)
    ledger = compute_ledger(
        entries,
        classify_gguf_tensor,
        gguf_layer_of,
        expert_count=arch.expert_count,
        expert_used_count=arch.expert_used_count,
    )
    file_type_id = _int(header.get("general.file_type"))
    nominal = gguf_file_type_name(file_type_id)
    quant = summarize_quantization(
        entries,
        classify_gguf_tensor,
        nominal_file_type=nominal,
        base_bits_per_weight=base_bits_per_weight(nominal),
    )
    quant.recipe = req.recipe
    if req.recipe is not None:
        quant.excluded_tensor_types = excluded_tensor_types(req.recipe, entries)
    quant.importance_matrix = importance_matrix_from_gguf(header)
    if req.effective is not None:
        ledger.effective = req.effective
    license_ = _resolve_license(_str(header.get("general.license")), req.license_id)
    base_url = _str(header.get("general.base_model.0.repo_url")) or ""
    gguf_base = base_url.removeprefix("https://huggingface.co/").strip("/")

    pairs: list[tuple[str | None, str | None]] = [(None, None)] * len(header.paths)
    if req.digest:
        if req.on_hashing:
            req.on_hashing(sum(p.stat().st_size for p in header.paths))
        pairs = list(sha256_files_and_regions(header.paths, header.data_offsets, req.progress))
    files = [
        FileEntry(path=p.name, bytes=p.stat().st_size, sha256=whole, role="weights")
        for p, (whole, _) in zip(header.paths, pairs, strict=True)
    ]
    regions = [region for _, region in pairs if region is not None]
    tensor_data = None
    if len(regions) == 1:
        tensor_data = regions[0]
    elif regions:
        tensor_data = hashlib.sha256("".join(regions).encode()).hexdigest()
    tokenizer_keys = sorted(k for k in header.kv_digests if k.startswith("tokenizer.ggml."))
    tokenizer_digest = (
        hashlib.sha256("".join(header.kv_digests[k] for k in tokenizer_keys).encode()).hexdigest()
        if tokenizer_keys
        else None
    )
    manifest = Manifest(
        model_id=req.model_id,
        source=req.source,
        license=license_,
        format="gguf",
        base_model=gguf_base if MODEL_ID_RE.match(gguf_base) else None,
        files=files,
        parameters=ledger,
        quantization=quant,
        architecture=arch,
        gguf=GGUFFacts(
            version=header.version,
            alignment=header.alignment,
            tensor_count=header.tensor_count,
            kv_count=header.kv_count,
            split_count=len(header.paths),
            file_type_id=file_type_id,
            quantization_version=_int(header.get("general.quantization_version")),
            tensor_data_sha256=tensor_data,
            tokenizer_sha256=tokenizer_digest,
            metadata_sha256=_metadata_digests(header.kv_digests),
        ),
        runtime=RuntimeRequirements(runtime="llama.cpp"),
        golden_prompts=list(req.golden_prompts),
        findings=gguf_findings(header.paths[0].name, header.metadata, req.model_id),
    )
    return BuiltArtifact(finalize(manifest), root)


def _chat_template_sha256(directory: Path) -> str | None:
    jinja = directory / "chat_template.jinja"
    if jinja.is_file():
        return hashlib.sha256(jinja.read_bytes()).hexdigest()
    for name in ("chat_template.json", "tokenizer_config.json"):
        path = directory / name
        if path.is_file():
            template = read_json_object(path).get("chat_template")
            if isinstance(template, str) and template:
                return hashlib.sha256(template.encode()).hexdigest()
    return None


def _build_safetensors(
    directory: Path, req: BuildRequest, known_digests: dict[str, str] | None = None
) -> BuiltArtifact:
    """A safetensors checkpoint directory: header-only tensor table, config facts, and every
    file that changes behaviour (weights, config, tokenizer, chat template) digested."""
    from modelreg.manifests.safetensors import DTYPE_BYTES, read_checkpoint

    checkpoint = read_checkpoint(directory)
    config_path = directory / "config.json"
    config = read_json_object(config_path) if config_path.is_file() else {}
    arch = (
        architecture_from_config(config, "config.json")
        if config
        else ArchitectureFacts(source=None)
    )
    arch.chat_template_sha256 = _chat_template_sha256(directory)
    arch.tied_embeddings = arch.tied_embeddings
    entries = [
        TensorEntry(t.name, t.n_elements, t.dtype, t.n_bytes, len(t.shape))
        for t in checkpoint.tensors
    ]
    ledger = compute_ledger(
        entries,
        classify_hf_tensor,
        hf_layer_of,
        expert_count=arch.expert_count,
        expert_used_count=arch.expert_used_count,
    )
    if req.effective is not None:
        ledger.effective = req.effective
    all_notes = []
    if not config:
        all_notes.append("no config.json: architecture facts unknown")
    else:
        all_notes += config_tensor_mismatches(config, entries)
    dtype = config.get("torch_dtype") or config.get("dtype") or text_config(config).get("dtype")
    nominal = (
        str(dtype)
        .upper()
        .replace("BFLOAT16", "BF16")
        .replace("FLOAT16", "F16")
        .replace("FLOAT32", "F32")
        if isinstance(dtype, str)
        else None
    )
    width = DTYPE_BYTES.get(nominal or "")
    quant = summarize_quantization(
        entries,
        classify_hf_tensor,
        nominal_file_type=nominal,
        base_bits_per_weight=width * 8 if width else None,
    )
    quant.recipe = req.recipe
    if req.recipe is not None:
        quant.excluded_tensor_types = excluded_tensor_types(req.recipe, entries)
    license_, base_model, card_label = _card_identity(directory, req.license_id)
    names = sorted(
        {p.name for p in checkpoint.files}
        | {p.name for p in directory.iterdir() if p.is_file() and file_role(p.name) != "other"}
        | ({CARD_FILE} if (directory / CARD_FILE).is_file() else set())
    )
    files = _file_entries(directory, names, req, known_digests or {})
    # transformers could load these instead of (or beside) the recorded weights; verify
    # never shows them to the runtime, but a deploy from this directory might: held, and
    # scanned like the recorded ones.
    unrecorded = unrecorded_runtime_files(directory, {f.path for f in files})
    manifest = Manifest(
        model_id=req.model_id,
        source=req.source,
        license=license_,
        format="safetensors",
        files=files,
        parameters=ledger,
        quantization=quant,
        architecture=arch,
        base_model=base_model,
        card_size_label=card_label,
        runtime=RuntimeRequirements(runtime="transformers"),
        golden_prompts=list(req.golden_prompts),
        notes=all_notes,
        findings=directory_findings(directory, [*names, *unrecorded]),
        unrecorded_files=list(unrecorded),
    )
    finalized = finalize(manifest)
    return BuiltArtifact(finalized, directory)


def _file_entries(
    directory: Path,
    names: Sequence[str],
    req: BuildRequest,
    known: dict[str, str],
    *,
    role: Callable[[str], Any] = file_role,
) -> list[FileEntry]:
    """Digest every named file (relative paths, concurrently) unless its sha256 is already
    ``known``."""
    to_hash = [n for n in names if n not in known] if req.digest else []
    paths = [directory / n for n in to_hash]
    if req.on_hashing and to_hash:
        req.on_hashing(sum(p.stat().st_size for p in paths))
    hashed = dict(zip(to_hash, sha256_files(paths, req.progress), strict=True)) if paths else {}
    return [
        FileEntry(
            path=n,
            bytes=(directory / n).stat().st_size,
            sha256=known.get(n) or hashed.get(n),
            role=role(n),
        )
        for n in names
    ]


# Tensor-name markers of the parts of a multimodal checkpoint that are not the language model.
_NOT_LANGUAGE_MODEL = (
    "vision_tower",
    "vision_model",
    "audio_tower",
    "embed_vision",
    "embed_audio",
    "multi_modal_projector",
)


def _is_multimodal(config: dict[str, Any]) -> bool:
    return any(isinstance(config.get(k), dict) for k in ("vision_config", "audio_config"))


def config_tensor_mismatches(config: dict[str, Any], entries: Sequence[TensorEntry]) -> list[str]:
    """Where the config's parameter count (language model) disagrees with the checkpoint's
    language-model tensors, in total and group by group."""
    implied = parameters_from_config(config)
    if implied is None:
        return []
    language = [e for e in entries if not any(m in e.name for m in _NOT_LANGUAGE_MODEL)]
    counted: dict[str, int] = {}
    for entry in language:
        role = classify_hf_tensor(entry.name)
        counted[role] = counted.get(role, 0) + entry.n_elements
    total = sum(counted.values())
    if total == implied.total:
        return []
    notes = [f"config implies {implied.total:,} parameters, the tensors hold {total:,}"]
    for group in sorted(set(implied.groups) | set(counted)):
        want, have = implied.groups.get(group, 0), counted.get(group, 0)
        if want != have:
            notes.append(f"group {group}: config implies {want:,}, the tensors hold {have:,}")
    return notes


def _card_identity(
    directory: Path, license_id: str | None
) -> tuple[License, str | None, str | None]:
    """License, base model and size label from the directory's model card (README.md), if it
    has one."""
    card = directory / CARD_FILE
    facts = read_card(card) if card.is_file() else None
    license_ = _resolve_license(facts.license if facts else None, license_id, f"card:{CARD_FILE}")
    base = facts.base_model if facts else None
    label = facts.size_label if facts else None
    return license_, base if base and MODEL_ID_RE.match(base) else None, label


def _build_from_hub(spec: str, req: BuildRequest) -> BuiltArtifact:
    """``hf://org/name@REV`` from the local cache; every file checked against its blob name.

    With ``trust_cache`` LFS files are not re-hashed: the blob's name is taken as their sha256.
    """
    resolution = resolve_hub_source(spec)
    if req.source is not None and req.source != resolution.pin:
        raise InvalidInput(
            f"`source` {req.source} contradicts {spec} (resolved to {resolution.pin})"
        )
    # Integrity first: a file that is not the Hub's file is reported as such (exit 1), not
    # as whatever parse error its content happens to cause. Each file is hashed once.
    snapshot = resolution.snapshot
    lfs = {rel: blob for rel, blob in resolution.blobs.items() if len(blob) == 64}
    known = dict(lfs) if req.trust_cache else {}
    to_hash = [rel for rel in sorted(lfs) if rel not in known] if req.digest else []
    if req.on_hashing and to_hash:
        req.on_hashing(sum((snapshot / rel).stat().st_size for rel in to_hash))
    hashed = sha256_files([snapshot / rel for rel in to_hash], req.progress)
    known |= dict(zip(to_hash, hashed, strict=True))
    check_against_blobs(resolution, known, snapshot)
    built = _build_safetensors(
        snapshot,
        replace(req, model_id=req.model_id or resolution.repo_id, source=resolution.pin),
        known_digests=known,
    )
    return BuiltArtifact(
        built.manifest,
        built.root,
        {
            "requested": spec,
            "commit": resolution.commit,
            "via": "local Hugging Face cache",
            "hashed": "LFS blobs trusted by name" if req.trust_cache else "every file re-hashed",
        },
    )


def _build_neuron(directory: Path, req: BuildRequest) -> BuiltArtifact:
    """An Inferentia2 bundle: compile facts, config facts, every file digested — and nothing
    from it executed (.pt files are read as zip archives)."""
    facts, hf_config = read_bundle(directory)
    for job, declared in (("compile_host", req.compile_host), ("deploy_host", req.deploy_host)):
        if declared is None:
            continue
        if declared.source == "unknown":
            raise InvalidInput(f"declared {job} needs a source: where was it measured?")
        stated = getattr(facts, job)
        if stated is not None and stated != declared:
            raise InvalidInput(
                f"declared {job} {declared.model_dump(exclude_none=True)} contradicts the "
                f"bundle's own {stated.model_dump(exclude_none=True)} — drop the declaration"
            )
        setattr(facts, job, declared)
    arch = architecture_from_config(hf_config, "config.json") if hf_config else ArchitectureFacts()
    ledger = ledger_from_config(hf_config) if hf_config else ParameterLedger()
    if req.effective is not None:
        ledger.effective = req.effective
    notes = []
    if ledger.total.value is not None and _is_multimodal(hf_config):
        notes.append(
            "parameters counted from config.json's text_config: the language model only, "
            "not its vision / audio towers"
        )
    files = _file_entries(directory, bundle_files(directory), req, {}, role=bundle_file_role)
    license_, base_model, card_label = _card_identity(directory, req.license_id)
    manifest = Manifest(
        model_id=req.model_id,
        source=req.source,
        license=license_,
        format="neuron",
        files=files,
        parameters=ledger,
        # A bundle has no tensor table here: its quantization is its facts, plus a recipe.
        quantization=Quantization(recipe=req.recipe) if req.recipe is not None else None,
        architecture=arch,
        neuron=facts,
        base_model=base_model,
        card_size_label=card_label,
        runtime=RuntimeRequirements(runtime="neuron"),
        golden_prompts=list(req.golden_prompts),
        notes=notes,
        findings=directory_findings(directory, [f.path for f in files]),
    )
    return BuiltArtifact(finalize(manifest), directory)
