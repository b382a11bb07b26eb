"""Classifying a smoke-test answer: pass, wrong_answer or degenerate.

"It loaded" proves nothing: a model fed 53× too-small embeddings loads fine and answers with a
wall of spaces or "\\n\\nterterterDDDCterter(". Degenerate means empty, whitespace only, no
letters at all, or mostly a short unit repeated.
"""

from __future__ import annotations

import re
from typing import Literal

Classification = Literal["pass", "wrong_answer", "degenerate"]

DEFAULT_COMPLETION_PROMPT = "The capital of France is"
# A chat model asked only "What is the capital of France?" may ramble (SmolLM2 lists
# arrondissements); asking for one word makes the check about the answer, not the style.
DEFAULT_CHAT_PROMPT = "What is the capital of France? Answer in one word."
DEFAULT_EXPECT = "Paris"

# A unit of 2-4 characters repeated at least twice in a row, or one character three times.
_REPEATS = re.compile(r"(.{2,4}?)\1+|(.)\2{2,}", re.DOTALL)
REPEAT_SHARE_DEGENERATE = 0.5


def repeated_share(text: str) -> float:
    """Share of the non-space characters that sit inside short repeated runs."""
    compact = "".join(text.split())
    if not compact:
        return 1.0
    covered = sum(m.end() - m.start() for m in _REPEATS.finditer(compact))
    return covered / len(compact)


def is_degenerate(text: str) -> bool:
    stripped = text.strip()
    if not stripped:
        return True
    if not any(ch.isalpha() for ch in stripped):
        return True
    words = stripped.split()
    if len(words) >= 4 and max(words.count(w) for w in set(words)) / len(words) >= 0.6:
        return True
    return repeated_share(stripped) >= REPEAT_SHARE_DEGENERATE


def classify_answer(output: str, expect: str = DEFAULT_EXPECT) -> Classification:
    """Pass iff the answer contains ``expect`` (case-insensitive)."""
    if expect.casefold() in output.casefold():
        return "pass"
    return "degenerate" if is_degenerate(output) else "wrong_answer"
