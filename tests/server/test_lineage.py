"""The base-model link (issue 42 item 7): a record of the base itself at the pinned revision, or
"none recorded" — never another quantization of the same id, never another revision."""

from __future__ import annotations

from typing import Any

from modelreg.server.dashboard import _lineage
from tests.helpers import add_synthetic

BASE = "acme/base"
PINNED = "a" * 40
OTHER = "b" * 40


def test_the_link_is_the_base_at_the_pinned_revision_or_none(registry: Any) -> None:
    quant = add_synthetic(
        registry, 1, "acme/chat-gguf", base_model=BASE, base_model_revision=PINNED
    )
    unregistered = _lineage(registry, (BASE, PINNED), quant)
    assert unregistered is not None and not unregistered.registered

    # The base model is registered, but only at another revision, and a quantization of the
    # same id names the pinned revision in its source: neither is the base at that revision.
    add_synthetic(registry, 2, BASE, source=f"hf://{BASE}@{OTHER}")
    add_synthetic(
        registry,
        3,
        BASE,
        source=f"hf://{BASE}@{PINNED}",
        base_model="acme/base-of-base",
        base_model_revision=OTHER,
    )
    lineage = _lineage(registry, (BASE, PINNED), quant)
    assert lineage is not None and lineage.registered and lineage.newest is None

    # The base's own record at the pinned revision is the link.
    base = add_synthetic(registry, 4, BASE, source=f"hf://{BASE}@{PINNED}")
    lineage = _lineage(registry, (BASE, PINNED), quant)
    assert lineage is not None and lineage.newest == base
    # Without a revision nothing is guessed.
    unpinned = _lineage(registry, (BASE, None), quant)
    assert unpinned is not None and unpinned.newest is None
