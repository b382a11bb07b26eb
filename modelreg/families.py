"""Model families a model id names, and the architectures each family is built on.

A model id is a name: "google/gemma-4-26b-a4b-it" says Gemma, and a file whose architecture is
``llama`` is not a Gemma, whatever it was added as. Only families whose architecture names are
distinctive are listed, each with every architecture its checkpoints and GGUF conversions are
known to use (llama.cpp's ``general.architecture`` and transformers' ``model_type``, compared by
prefix: ``qwen`` covers qwen2, qwen3moe, qwen2_5_vl…). A family the table does not know, or a
model id that names none, is not checked.
"""

from __future__ import annotations

import re

# family name as written in model ids -> architecture prefixes it is built on.
FAMILY_ARCHITECTURES: dict[str, tuple[str, ...]] = {
    "gemma": ("gemma",),
    "llama": ("llama", "mllama"),
    # Mistral and Mixtral checkpoints convert to llama.cpp's ``llama`` architecture.
    "mistral": ("mistral", "mixtral", "llama"),
    "mixtral": ("mixtral", "llama"),
    "qwen": ("qwen",),
    "phi": ("phi",),
    # SmolLM and SmolLM2 are llama-architecture models; SmolLM3 has its own.
    "smollm": ("llama", "smollm"),
    # deepseek-llm and deepseek-coder v1 are llama-architecture models.
    "deepseek": ("deepseek", "llama"),
    "falcon": ("falcon",),
    "olmo": ("olmo",),
    "granite": ("granite",),
    "starcoder": ("starcoder",),
    "internlm": ("internlm",),
}

_TOKEN_SPLIT_RE = re.compile(r"[-_.\s]+")


def _names_family(token: str, family: str) -> bool:
    """Whether a token names the family: "gemma3" and "Qwen2" do, "dolphin" does not name phi."""
    if not token.startswith(family):
        return False
    rest = token[len(family) :]
    return not rest or rest[0].isdigit()


def families_named(model_id: str) -> list[str]:
    """The families the name part of ``model_id`` names ("DeepSeek-R1-Distill-Qwen-7B" names
    two: the distilled model is a Qwen)."""
    name = model_id.split("/", 1)[-1].lower()
    tokens = [t for t in _TOKEN_SPLIT_RE.split(name) if t]
    return [f for f in FAMILY_ARCHITECTURES if any(_names_family(t, f) for t in tokens)]


def family_contradiction(model_id: str, architecture: str) -> list[str] | None:
    """The families ``model_id`` names when ``architecture`` belongs to none of them; None
    when it belongs to one, or the id names no family this table knows."""
    named = families_named(model_id)
    arch = architecture.strip().lower()
    if not named or any(
        arch.startswith(prefix) for f in named for prefix in FAMILY_ARCHITECTURES[f]
    ):
        return None
    return named
