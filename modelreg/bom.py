"""A CycloneDX 1.6 ML-BOM of records: what a supply chain's other tools read.

Each record is a ``machine-learning-model`` component in ``components[]`` (where other tools
count models; the BOM's subject, ``metadata.component``, is the model they are records of):
its files as nested ``file``
components with their sha256, its license as an SPDX id where the Hub's id is one (else by
name), the base model as pedigree, and a model card — ``modelParameters`` with the
architecture; the parameter ledger and the quantization as the card's properties (the 1.6
``modelParameters`` object admits no other fields); ``quantitativeAnalysis`` from the suite
results of each run that counts (the run a target's deployability rests on); the production
approvals' limitations as technical limitations. The runtime a counting run used (its package
versions, the llama.cpp build, each with its license) is a set of components the model depends
on; the chat template's digest is a nested ``data`` component, and each counting
run is an external reference of type ``evidence`` (``urn:modelreg:run:<id>``; the run, with its
checks and evidence, is ``modelreg show RECORD --json``). Every location is a
``distribution`` reference.

Built from the public outputs (``show`` and ``locate``), so the BOM says what the registry
says. Properties use the ``modelreg:`` namespace. No dependency is needed to write one; the
tests validate each against the official schema with cyclonedx-python-lib's strict validator.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from modelreg.schemas.output import LocationsOutput, RunOut, ShowOutput

SPEC_VERSION = "1.6"

# The Hub's license ids that are SPDX ids, in SPDX's spelling (checked in the tests against
# the SPDX list the CycloneDX schema carries). Others (gemma, llama3.1, openrail…) go by name.
SPDX_IDS = {
    spdx.lower(): spdx
    for spdx in [
        "AFL-3.0",
        "AGPL-3.0",
        "Apache-2.0",
        "Artistic-2.0",
        "BSD-2-Clause",
        "BSD-3-Clause",
        "BSD-3-Clause-Clear",
        "BSL-1.0",
        "CC-BY-2.0",
        "CC-BY-2.5",
        "CC-BY-3.0",
        "CC-BY-4.0",
        "CC-BY-NC-2.0",
        "CC-BY-NC-3.0",
        "CC-BY-NC-4.0",
        "CC-BY-NC-ND-3.0",
        "CC-BY-NC-ND-4.0",
        "CC-BY-NC-SA-2.0",
        "CC-BY-NC-SA-3.0",
        "CC-BY-NC-SA-4.0",
        "CC-BY-ND-4.0",
        "CC-BY-SA-3.0",
        "CC-BY-SA-4.0",
        "CC0-1.0",
        "CDLA-Permissive-1.0",
        "CDLA-Permissive-2.0",
        "CDLA-Sharing-1.0",
        "ECL-2.0",
        "EPL-1.0",
        "EPL-2.0",
        "etalab-2.0",
        "EUPL-1.1",
        "EUPL-1.2",
        "GPL-2.0",
        "GPL-3.0",
        "ISC",
        "LGPL-2.1",
        "LGPL-3.0",
        "LPPL-1.3c",
        "MIT",
        "MPL-2.0",
        "MS-PL",
        "NCSA",
        "OFL-1.1",
        "OpenMDW-1.0",
        "OSL-3.0",
        "PostgreSQL",
        "Unlicense",
        "WTFPL",
        "Zlib",
    ]
}
_PACKAGES = ("llama-cpp-python", "transformers", "torch", "torch-neuronx", "neuronx-cc")
# The runtimes' licenses as their projects publish them (SPDX). The Neuron packages are AWS's
# own terms, named as such rather than guessed as an SPDX id.
RUNTIME_LICENSES = {
    "llama-cpp-python": "MIT",
    "llama.cpp": "MIT",
    "transformers": "Apache-2.0",
    "torch": "BSD-3-Clause",
}
RUNTIME_LICENSE_NAMES = {
    "torch-neuronx": "AWS Neuron SDK license (see the package's metadata)",
    "neuronx-cc": "AWS Neuron SDK license (see the package's metadata)",
}
_HF_SOURCE = re.compile(r"hf://(?P<org>[^/@]+)/(?P<name>[^/@]+)@(?P<rev>[0-9a-f]{40})")
_PYPI_SOURCE = re.compile(r"pypi://(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<ver>\S+)")


def _prop(name: str, value: object) -> dict[str, str]:
    return {"name": f"modelreg:{name}", "value": str(value)}


def license_choice(license_id: str | None) -> list[dict[str, Any]]:
    """CycloneDX ``licenses`` for a Hub license id: SPDX where it is one, else by name;
    nothing when it is unknown (a consumer reads a missing license as unknown)."""
    if not license_id or license_id in ("unknown", "other"):
        return []
    spdx = SPDX_IDS.get(license_id.lower())
    return [{"license": {"id": spdx} if spdx else {"name": license_id}}]


def _counting_runs(show: ShowOutput) -> list[tuple[str, RunOut]]:
    """(target, run) for each target whose deployability rests on a run."""
    runs = {r.run_id: r for r in show.runs}
    return [
        (d.target, runs[d.run_id])
        for d in show.deployability
        if d.run_id is not None and d.run_id in runs
    ]


def _metrics(show: ShowOutput) -> list[dict[str, Any]]:
    metrics: list[dict[str, Any]] = []
    for target, run in _counting_runs(show):
        for check in run.checks:
            where = f"target {target}, run {run.run_id}, check {check.check}"
            suite = check.evidence.get("suite_result")
            if not isinstance(suite, dict):
                metrics.append({"type": "outcome", "value": check.outcome.value, "slice": where})
                continue
            named = f"{where}, suite {suite.get('suite_name')}"
            metrics.append(
                {"type": "pass_rate", "value": _num(suite.get("pass_rate")), "slice": named}
            )
            for subset in suite.get("subsets") or []:
                metrics.append(
                    {
                        "type": "pass_rate",
                        "value": _num(subset.get("pass_rate")),
                        "slice": f"{named}, subset {subset.get('subset')}",
                    }
                )
            resources = suite.get("resources") or {}
            for key, kind in (
                ("decode_tokens_per_s", "decode_tokens_per_second"),
                ("prompt_tokens_per_s", "prompt_tokens_per_second"),
                ("ttft_ms_median", "ttft_ms_p50"),
                ("ttft_ms_p95", "ttft_ms_p95"),
                ("peak_rss_bytes", "peak_rss_bytes"),
            ):
                if resources.get(key) is not None:
                    metrics.append({"type": kind, "value": _num(resources[key]), "slice": named})
    return metrics


def _num(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _architecture(manifest: dict[str, Any]) -> str:
    arch = manifest.get("architecture") or {}
    parts = [str(arch.get("architecture") or manifest.get("format"))]
    for key, label in (
        ("block_count", "layers"),
        ("embedding_length", "embedding"),
        ("context_length", "context"),
        ("expert_count", "experts"),
    ):
        if arch.get(key) is not None:
            parts.append(f"{arch[key]} {label}")
    return ", ".join(parts)


def _approval_properties(show: ShowOutput) -> list[dict[str, str]]:
    """Who answers for the record where it is production (and where it was approved before),
    and by when it must be re-tested (the promotion's owner / re-test date): CycloneDX has no
    field for either, so properties."""
    props: list[dict[str, str]] = []
    for kind, promotions in (("production", show.production), ("approved", show.approvals)):
        for p in promotions:
            if p.owner:
                props.append(_prop(f"{kind}:{p.target}:owner", p.owner))
            if p.retest_by:
                props.append(_prop(f"{kind}:{p.target}:retest_by", p.retest_by.isoformat()))
    return props


def _card_properties(manifest: dict[str, Any]) -> list[dict[str, str]]:
    props: list[dict[str, str]] = []
    for name, count in (manifest.get("parameters") or {}).items():
        if isinstance(count, dict) and "value" in count:
            props.append(
                _prop(
                    f"parameters:{name}",
                    count["value"] if count["value"] is not None else "unknown",
                )
            )
            props.append(_prop(f"parameters:{name}:provenance", count.get("provenance", "unknown")))
    quant = manifest.get("quantization") or {}
    for key in ("nominal_file_type", "bits_per_weight"):
        if quant.get(key) is not None:
            props.append(_prop(f"quantization:{key}", _num(quant[key])))
    for tensor_type, stats in sorted((quant.get("tensor_types") or {}).items()):
        # Named for what each holds: how many tensors of the type, their weights, their bytes.
        for key, field in (("tensors", "tensors"), ("parameters", "params"), ("bytes", "bytes")):
            value = stats.get(field)
            props.append(
                _prop(
                    f"quantization:tensor_type:{tensor_type}:{key}",
                    value if value is not None else "unknown",
                )
            )
    recipe = quant.get("recipe") or {}
    for key, value in sorted(recipe.items()):
        if value not in (None, [], ""):
            props.append(_prop(f"quantization:recipe:{key}", value))
    return props


def _runtime_components(show: ShowOutput) -> list[dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for _, run in _counting_runs(show):
        fingerprint = run.fingerprint
        for package in _PACKAGES:
            version = fingerprint.get(package)
            if version and version != "not installed":
                ref = f"pypi:{package}@{version}"
                found[ref] = {
                    "type": "library",
                    "bom-ref": ref,
                    "name": package,
                    "version": version,
                    "purl": f"pkg:pypi/{package}@{version}",
                    **_runtime_license(package),
                }
        build = fingerprint.get("llama.cpp build")
        if build:
            ref = f"llama.cpp@{build}"
            found[ref] = {
                "type": "framework",
                "bom-ref": ref,
                "name": "llama.cpp",
                "version": build,
                "description": "the llama.cpp build the run loaded (a digest of its library)",
                **_runtime_license("llama.cpp"),
            }
    return list(found.values())


def _runtime_license(name: str) -> dict[str, Any]:
    if name in RUNTIME_LICENSES:
        return {"licenses": [{"license": {"id": RUNTIME_LICENSES[name]}}]}
    if name in RUNTIME_LICENSE_NAMES:
        return {"licenses": [{"license": {"name": RUNTIME_LICENSE_NAMES[name]}}]}
    return {}


def purl(source: str | None) -> str | None:
    """The package URL of a record's source: ``pkg:huggingface/org/name@commit`` for
    ``hf://``, ``pkg:pypi/name@version`` for ``pypi://``; None for a bare sha256 pin."""
    hub = _HF_SOURCE.fullmatch(source or "")
    if hub:
        return f"pkg:huggingface/{hub['org']}/{hub['name']}@{hub['rev']}"
    pypi = _PYPI_SOURCE.fullmatch(source or "")
    if pypi:
        name = re.sub(r"[-_.]+", "-", pypi["name"]).lower()  # PEP 503, as purl's pypi type
        return f"pkg:pypi/{name}@{pypi['ver']}"
    return None


def record_component(show: ShowOutput, locations: LocationsOutput) -> dict[str, Any]:
    record, manifest = show.record, show.manifest
    ref = f"record:{record.record_id}"
    org, _, name = record.model_id.rpartition("/")
    component: dict[str, Any] = {
        "type": "machine-learning-model",
        "bom-ref": ref,
        "name": name,
        "version": record.record_id,
        "description": f"{record.format} artifact of {record.model_id}, record {record.record_id}",
    }
    if org:
        component["group"] = org
    if len(record.files) == 1 and record.files[0].sha256:
        component["hashes"] = [{"alg": "SHA-256", "content": record.files[0].sha256}]
    component["licenses"] = license_choice(record.license)
    if not component["licenses"]:
        del component["licenses"]
    package_url = purl(record.source)
    if package_url:
        component["purl"] = package_url
    base = manifest.get("base_model")
    if base:
        ancestor: dict[str, Any] = {"type": "machine-learning-model", "name": base}
        if manifest.get("base_model_revision"):
            ancestor["version"] = manifest["base_model_revision"]
        component["pedigree"] = {"ancestors": [ancestor]}
    references = [
        {"type": "distribution", "url": loc.url, "comment": f"a copy of the files ({loc.scheme})"}
        for loc in locations.locations
    ]
    if record.source:
        references.append(
            {"type": "other", "url": record.source, "comment": "what the artifact was built from"}
        )
    for target, run in _counting_runs(show):
        outcomes = ", ".join(f"{c.check} {c.outcome.value}" for c in run.checks)
        references.append(
            {
                "type": "evidence",
                "url": f"urn:modelreg:run:{run.run_id}",
                "comment": f"verify on {target} ({run.origin}, host {run.host}): {outcomes}",
            }
        )
    if references:
        component["externalReferences"] = references
    card: dict[str, Any] = {
        "bom-ref": f"{ref}:model-card",
        "modelParameters": {
            "task": "text-generation",
            "architectureFamily": "transformer",
            "modelArchitecture": _architecture(manifest),
            "inputs": [{"format": "text"}],
            "outputs": [{"format": "text"}],
        },
    }
    metrics = _metrics(show)
    if metrics:
        card["quantitativeAnalysis"] = {"performanceMetrics": metrics}
    limitations = sorted(
        {lim for p in [*show.production, *show.approvals] for lim in p.limitations}
    )
    if limitations:
        card["considerations"] = {"technicalLimitations": limitations}
    card["properties"] = _card_properties(manifest) + _approval_properties(show)
    component["modelCard"] = card
    component["components"] = [
        {
            "type": "file",
            "bom-ref": f"{ref}:file:{f.path}",
            "name": f.path,
            **({"hashes": [{"alg": "SHA-256", "content": f.sha256}]} if f.sha256 else {}),
            "properties": [_prop("bytes", f.bytes if f.bytes is not None else "unknown")],
        }
        for f in record.files
    ]
    template_sha256 = (manifest.get("architecture") or {}).get("chat_template_sha256")
    if template_sha256:
        # The chat template is code a runtime runs on every request: its own digest, apart
        # from the file that carries it (a GGUF's metadata, chat_template.jinja…).
        component["components"].append(
            {
                "type": "data",
                "bom-ref": f"{ref}:chat-template",
                "name": "chat template",
                "hashes": [{"alg": "SHA-256", "content": template_sha256}],
                "description": "the chat template the runtime renders (modelreg scans it)",
            }
        )
    props = [_prop("state", record.state.state), _prop("format", record.format)]
    if template_sha256:
        props.append(_prop("chat_template:sha256", template_sha256))
    props += [_prop("hold_reason", reason) for reason in record.hold_reasons]
    props += [_prop(f"production:{p.target}", p.at.isoformat()) for p in show.production]
    props += [_prop(f"deployable:{d.target}", d.now) for d in show.deployability]
    component["properties"] = props
    return component


def bom(
    shown: Sequence[tuple[ShowOutput, LocationsOutput]],
    *,
    version: str,
    now: datetime | None = None,
) -> dict[str, Any]:
    """The BOM of these records (one: it is the BOM's subject; several: one model's)."""
    components: list[dict[str, Any]] = []
    runtime: dict[str, dict[str, Any]] = {}
    dependencies: list[dict[str, Any]] = []
    for show, locations in shown:
        component = record_component(show, locations)
        components.append(component)
        used = _runtime_components(show)
        runtime |= {c["bom-ref"]: c for c in used}
        dependencies.append(
            {"ref": component["bom-ref"], "dependsOn": [c["bom-ref"] for c in used]}
        )
    dependencies += [{"ref": ref} for ref in runtime]
    metadata: dict[str, Any] = {
        "timestamp": (now or datetime.now(UTC)).isoformat(timespec="seconds"),
        "tools": {"components": [{"type": "application", "name": "modelreg", "version": version}]},
    }
    models = sorted({show.record.model_id for show, _ in shown})
    # Every record is a machine-learning-model in components[] (where other tools count
    # models); the BOM's subject is the model they are records of.
    if len(models) == 1:
        org, _, name = models[0].rpartition("/")
        metadata["component"] = {
            "type": "machine-learning-model",
            "bom-ref": f"model:{models[0]}",
            "name": name,
            **({"group": org} if org else {}),
            "description": f"{models[0]}: the records of it this BOM describes",
        }
        records = [c["bom-ref"] for c in components]
        dependencies.insert(0, {"ref": f"model:{models[0]}", "dependsOn": records})
    return {
        "$schema": "http://cyclonedx.org/schema/bom-1.6.schema.json",
        "bomFormat": "CycloneDX",
        "specVersion": SPEC_VERSION,
        "serialNumber": f"urn:uuid:{uuid.uuid4()}",
        "version": 1,
        "metadata": metadata,
        "components": components + list(runtime.values()),
        "dependencies": dependencies,
    }


def refs(document: dict[str, Any]) -> Iterable[str]:
    """Every bom-ref in the document (tests: each is unique)."""
    stack: list[Any] = [document]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if isinstance(node.get("bom-ref"), str):
                yield node["bom-ref"]
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
