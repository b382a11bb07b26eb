"""``modelreg scan``: the safety findings of files and directories as ``add`` would record them,
with no database — a GGUF file's through the manifest ``inspect`` would build (its names
checked against the tensors and the model id), anything else through ``modelreg.safety``."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from modelreg.errors import InvalidArtifact, InvalidInput
from modelreg.manifests.build import build_manifest
from modelreg.safety.pickles import may_hold_pickle
from modelreg.safety.scan import (
    directory_findings,
    hidden_characters,
    json_object,
    pickle_findings,
    read_text,
    starts_like_pickle,
    template_findings,
)
from modelreg.schemas.manifest import Finding


def _gguf_scan(path: Path, model_id: str | None) -> list[Finding]:
    """A GGUF file's findings, with its names checked against the tensors and the model id
    as ``add`` checks them (identity holds of the manifest ``inspect`` would build)."""
    manifest = build_manifest([path], model_id=model_id, digest=False).manifest
    findings = list(manifest.findings)
    for reason in manifest.hold_reasons:
        if reason.startswith("identity_mismatch: ") and not any(
            reason.endswith(f.message) for f in findings
        ):
            findings.append(
                Finding(
                    code="identity_mismatch",
                    file=path.name,
                    message=reason.removeprefix("identity_mismatch: "),
                )
            )
    return findings


def scan_path(path: Path, model_id: str | None = None) -> list[Finding]:
    """The findings of one file or directory, by what it is: a GGUF file; a checkpoint or
    bundle directory (every file in it); a chat template (``.jinja``); a tokenizer config or
    chat_template.json; a pickle-bearing file; a model card or other text. Raises
    ``InvalidInput`` for a path that is not there or not readable."""
    if not path.exists():
        raise InvalidArtifact(path, "file not found")
    if path.is_dir():
        names = [p.relative_to(path).as_posix() for p in sorted(path.rglob("*")) if p.is_file()]
        return directory_findings(path, names)
    if not path.is_file():
        raise InvalidInput(f"{path}: not a regular file")
    name = path.name
    with path.open("rb") as fh:
        head = fh.read(4)
    if head == b"GGUF" or path.suffix == ".gguf":
        return _gguf_scan(path, model_id)
    if path.suffix == ".jinja":
        return template_findings(name, None, read_text(path))
    if path.suffix == ".json":
        data = json_object(path)
        if data is None:
            raise InvalidArtifact(path, "not a JSON object")
        findings: list[Finding] = []
        template = data.get("chat_template")
        templates = (
            [("chat_template", template)]
            if isinstance(template, str)
            else [
                (f"chat_template[{t.get('name', i)}]", t["template"])
                for i, t in enumerate(template if isinstance(template, list) else [])
                if isinstance(t, dict) and isinstance(t.get("template"), str)
            ]
        )
        for where, text in templates:
            findings += template_findings(name, where, text)
        return findings
    if may_hold_pickle(name) or starts_like_pickle(path):
        return pickle_findings(path.parent, [name])
    hidden = hidden_characters(read_text(path))
    if hidden:
        return [
            Finding(
                code="hidden_text",
                file=name,
                message=f"hides characters a reader cannot see: {hidden}",
                holds=False,
            )
        ]
    return []


def scan_paths(paths: Iterable[Path | str], model_id: str | None = None) -> list[Finding]:
    """Every finding of every path (``modelreg scan``): no database, nothing rendered or
    unpickled. All paths are checked to exist before any is scanned."""
    resolved = [Path(p).expanduser() for p in paths]
    for path in resolved:
        if not path.exists():
            raise InvalidArtifact(path, "file not found")
    findings: list[Finding] = []
    for path in resolved:
        for finding in scan_path(path, model_id):
            shown = str(path / finding.file) if path.is_dir() else str(path)
            findings.append(finding.model_copy(update={"file": shown}))
    return findings
