"""Words and numbers both card readers use (``card_claims``, English; ``card_korean``): what a
claim is about, a number with its scale word, a license named in prose."""

from __future__ import annotations

import re
from typing import Literal

from modelreg.schemas.licenses import KNOWN_LICENSES

ClaimKind = Literal[
    "quantization",
    "bits_per_weight",
    "bits",
    "context_length",
    "sequence_length",
    "tp_degree",
    "batch_size",
    "parameters",
    "active_parameters",
    "license",
    "base_model",
]
_SCALES = {
    "k": 10**3,
    "thousand": 10**3,
    "m": 10**6,
    "million": 10**6,
    "b": 10**9,
    "billion": 10**9,
    "t": 10**12,
    "trillion": 10**12,
}
# How people name the common licenses in prose -> the Hub's id.
LICENSE_NAMES = {
    "apache 2.0": "apache-2.0",
    "apache-2.0": "apache-2.0",
    "apache license 2.0": "apache-2.0",
    "apache license, version 2.0": "apache-2.0",
    "mit": "mit",
    "gemma": "gemma",
    "llama 2": "llama2",
    "llama 3": "llama3",
    "llama 3.1": "llama3.1",
    "llama 3.2": "llama3.2",
    "cc by 4.0": "cc-by-4.0",
    "cc-by-4.0": "cc-by-4.0",
    "bsd 3-clause": "bsd-3-clause",
    "gpl-3.0": "gpl-3.0",
}
_LICENSE_END_RE = re.compile(r"[(\[]")


def number(text: str, scale: str | None = None) -> float:
    return float(text.replace(",", "").replace("_", "")) * _SCALES.get((scale or "").lower(), 1)


def license_id(text: str) -> str | None:
    """The Hub license id a card's words name (None: not one this knows)."""
    words = _LICENSE_END_RE.split(text.strip().strip(".").lower(), maxsplit=1)[0].strip()
    if words in KNOWN_LICENSES:
        return words
    return LICENSE_NAMES.get(words.removesuffix(" license").removeprefix("the "))
