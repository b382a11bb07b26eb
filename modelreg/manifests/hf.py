"""Hugging Face checkpoints: which files make the artifact, the model card's facts, and
``hf://org/name@REV`` resolved offline through the local Hugging Face cache.

In the cache (``models--org--name/{blobs,refs,snapshots/<commit>/}``) every snapshot file links
to a blob named by its digest: the sha256 for LFS files, the git blob sha1 for small files. A
local file can therefore be checked against the Hub's identity for it without any network.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from modelreg.boundedfile import read_bounded
from modelreg.errors import IntegrityError, InvalidArtifact, InvalidInput, MovingReference
from modelreg.manifests.size_label import parse_size_label

CONFIG_FILES = ("config.json", "generation_config.json", "model.safetensors.index.json")
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "tokenizer.model",
    "vocab.json",
    "merges.txt",
    "added_tokens.json",
)
TEMPLATE_FILES = ("chat_template.jinja", "chat_template.json")
CARD_FILE = "README.md"
_HF_RE = re.compile(r"^hf://(?P<repo>[^/@\s]+/[^/@\s]+)@(?P<rev>\S+)$")
_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
_SHA1_RE = re.compile(r"^[0-9a-f]{40}$")
MAX_CARD_BYTES = 1 << 20


def file_role(name: str) -> Literal["weights", "config", "tokenizer", "chat_template", "other"]:
    if name.endswith((".safetensors", ".pt", ".neff")):
        return "weights"
    if name in CONFIG_FILES or name in ("neuron_config.json", "modelreg-deploy.json"):
        return "config"
    if name in TOKENIZER_FILES:
        return "tokenizer"
    if name in TEMPLATE_FILES:
        return "chat_template"
    return "other"


@dataclass(frozen=True)
class CardFacts:
    license: str | None
    base_model: str | None
    path: Path
    # The size label its model_name (else its first heading) names, as written ("135M").
    size_label: str | None = None


_HEADING_RE = re.compile(r"^#\s+(.+)$", re.MULTILINE)
# A backslash before ASCII punctuation is a Markdown escape (``card render`` writes them).
_MARKDOWN_ESCAPE_RE = re.compile(r"\\([!-/:-@\[-`{-~])")


def card_size_label(meta: dict[str, Any], body: str) -> str | None:
    """The size label a card names: in its front matter's ``model_name``, else in its first
    heading (Markdown escapes undone), as written; None when neither names one."""
    heading = _HEADING_RE.search(body)
    for text in (
        meta.get("model_name"),
        _MARKDOWN_ESCAPE_RE.sub(r"\1", heading.group(1)) if heading else None,
    ):
        label = parse_size_label(text) if isinstance(text, str) else None
        if label is not None:
            return label.raw
    return None


# How huggingface_hub finds a card's front matter (optional leading whitespace, "---", the
# YAML, "---"), without its regular expression, which backtracks quadratically on a run of
# newlines.
_FRONT_MATTER_OPENING = re.compile(r"\s*---[\r\n]+")
_FRONT_MATTER_CLOSING = re.compile(r"[\r\n]---(?:\r\n|\n)")


def read_card_front_matter(path: Path) -> tuple[dict[str, Any], str]:
    """(metadata, body) of a model card (``read_card_parts`` without the body's line)."""
    meta, body, _ = read_card_parts(path)
    return meta, body


def read_card_parts(path: Path) -> tuple[dict[str, Any], str, int]:
    """(metadata, body, the file line the body starts on) of a model card: its YAML front
    matter, read where the Hub reads it.

    The front matter is parsed by ``safeyaml``'s loader, so anchors and aliases (alias bombs),
    deep nesting and non-string keys are refused wherever they appear; an unreadable card is
    one line of bad input.
    """
    from modelreg.safeyaml import load_yaml

    data = read_bounded(path, max_bytes=MAX_CARD_BYTES, what="model card")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidArtifact(path, "model card is not UTF-8 text") from None
    opening = _FRONT_MATTER_OPENING.match(text)
    closing = _FRONT_MATTER_CLOSING.search(text, opening.end() - 1) if opening else None
    if opening is None or closing is None:
        return {}, text, 1
    front = text[opening.end() : closing.start()]
    # Blank lines for the ones before it, so YAML errors give the card's own line numbers.
    lines_before = text.count("\n", 0, opening.end())
    meta = load_yaml("\n" * lines_before + front, origin=f"{path}: front matter")
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise InvalidInput(f"{path}: front matter is not a YAML mapping of field: value")
    return meta, text[closing.end() :], text.count("\n", 0, closing.end()) + 1


def read_card(path: Path) -> CardFacts:
    """License, base model and size label from a model card (offline)."""
    data, body = read_card_front_matter(path)
    license_ = data.get("license") if isinstance(data.get("license"), str) else None
    base = data.get("base_model")
    if isinstance(base, list):
        base = base[0] if len(base) == 1 else None
    return CardFacts(
        license_, base if isinstance(base, str) else None, path, card_size_label(data, body)
    )


@dataclass(frozen=True)
class HubResolution:
    """An ``hf://`` source resolved through the local cache."""

    repo_id: str
    requested: str  # the revision as given: a commit, a branch or a tag
    commit: str
    snapshot: Path
    blobs: dict[str, str] = field(default_factory=dict)  # relative path -> blob name

    @property
    def pin(self) -> str:
        return f"hf://{self.repo_id}@{self.commit}"


def resolve_hub_source(source: str) -> HubResolution:
    """Resolve ``hf://org/name@REV`` offline; a branch or tag becomes its cached commit."""
    match = _HF_RE.match(source.strip())
    if not match:
        raise MovingReference(source, "give a revision: hf://org/name@<commit, branch or tag>")
    repo_id, rev = match.group("repo"), match.group("rev")
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        snapshot = Path(
            snapshot_download(repo_id, revision=rev, local_files_only=True, cache_dir=_cache_dir())
        )
    except LocalEntryNotFoundError:
        raise InvalidInput(
            f"{source}: revision {rev!r} of {repo_id} is not in the local Hugging Face cache "
            f"({_cache_dir()}) — download it first, e.g. hf download {repo_id} --revision {rev}"
        ) from None
    commit = snapshot.name
    if not _SHA1_RE.match(commit):
        raise InvalidInput(f"{source}: cache snapshot {snapshot} is not named by a commit")
    blobs = {}
    for path in sorted(snapshot.rglob("*")):
        if path.is_symlink():
            blobs[path.relative_to(snapshot).as_posix()] = Path(os.readlink(path)).name
    return HubResolution(repo_id, rev, commit, snapshot, blobs)


def _cache_dir() -> str:
    """The cache huggingface_hub would use, read now (its constants are read at import)."""
    if os.environ.get("HF_HUB_CACHE"):
        return os.environ["HF_HUB_CACHE"]
    if os.environ.get("HF_HOME"):
        return str(Path(os.environ["HF_HOME"]) / "hub")
    from huggingface_hub.constants import HF_HUB_CACHE

    return str(HF_HUB_CACHE)


def git_blob_sha1(path: Path) -> str:
    """The git object id of a file: how the Hub names the blobs of non-LFS files."""
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def check_against_blobs(resolution: HubResolution, digests: dict[str, str], root: Path) -> None:
    """Every cached file's content must match the digest its blob is named by."""
    for rel, blob in resolution.blobs.items():
        if _SHA256_RE.match(blob):
            actual = digests.get(rel)
            if actual is not None and actual != blob:
                raise IntegrityError(
                    f"{rel}: content sha256 {actual} does not match its LFS blob {blob} in the "
                    f"Hugging Face cache ({resolution.repo_id}@{resolution.commit}) — the local "
                    "file is not the Hub's file; delete the blob and download it again"
                )
        elif _SHA1_RE.match(blob):
            actual = git_blob_sha1(root / rel)
            if actual != blob:
                raise IntegrityError(
                    f"{rel}: git blob id {actual} does not match {blob} in the Hugging Face "
                    f"cache ({resolution.repo_id}@{resolution.commit})"
                )
        else:
            raise InvalidArtifact(root / rel, f"cache blob name {blob!r} is not a digest")


# Weights and code in a checkpoint directory that transformers (or torch, or a
# trust_remote_code model) would load or import if they were there: an unrecorded one means a
# deploy from that directory could run on bytes the record never listed.
RUNTIME_LOADABLE_SUFFIXES = (
    ".safetensors",
    ".bin",
    ".pt",
    ".pth",
    ".ckpt",
    ".pkl",
    ".pickle",
    ".h5",
    ".msgpack",
    ".onnx",
    ".gguf",
    ".py",
)


def unrecorded_runtime_files(directory: Path, recorded: set[str]) -> list[str]:
    """Files in ``directory`` that a transformers-style loader could pick up but the record
    does not list (sorted names)."""
    try:
        entries = list(directory.iterdir())
    except OSError:
        return []
    return sorted(
        p.name
        for p in entries
        if p.is_file()
        and not p.name.startswith(".")
        and p.name not in recorded
        and p.suffix.lower() in RUNTIME_LOADABLE_SUFFIXES
    )
