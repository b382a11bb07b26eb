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

from modelreg.errors import IntegrityError, InvalidArtifact, InvalidInput, MovingReference

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
_YAML_ANCHOR_RE = re.compile(r"(^|[\s\[{,:-])[&*][A-Za-z0-9_-]+", re.MULTILINE)


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


def read_card_front_matter(path: Path) -> tuple[dict[str, Any], str]:
    """(metadata, body) of a model card, read offline with huggingface_hub's card classes.

    Unreadable cards (not UTF-8, invalid YAML, nesting deep enough to exhaust the parser) are
    bad input. Aliased YAML nodes stay shared, so an alias bomb costs nothing until walked —
    and callers only read named keys.
    """
    import yaml
    from huggingface_hub import ModelCard

    try:
        if path.stat().st_size > MAX_CARD_BYTES:
            raise InvalidInput(f"{path}: model card larger than {MAX_CARD_BYTES} bytes")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InvalidInput(f"{path}: file not found") from None
    except UnicodeDecodeError:
        raise InvalidInput(f"{path}: model card is not UTF-8 text") from None
    front = text.split("\n---", 1)[0] if text.startswith("---") else ""
    if _YAML_ANCHOR_RE.search(front):
        # Model cards have no use for anchors and aliases; refusing them rules out alias
        # bombs ("billion laughs") whatever a later reader does with the data.
        raise InvalidInput(f"{path}: YAML anchors/aliases are not accepted in card front matter")
    try:
        card = ModelCard(text, ignore_metadata_errors=True)
    except (ValueError, yaml.YAMLError, RecursionError, MemoryError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InvalidInput(f"{path}: front matter is not valid YAML: {first}") from None
    return card.data.to_dict(), card.text


def read_card(path: Path) -> CardFacts:
    """License and base model from a model card's YAML front matter (offline)."""
    data, _ = read_card_front_matter(path)
    license_ = data.get("license") if isinstance(data.get("license"), str) else None
    base = data.get("base_model")
    if isinstance(base, list):
        base = base[0] if len(base) == 1 else None
    return CardFacts(license_, base if isinstance(base, str) else None, path)


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
