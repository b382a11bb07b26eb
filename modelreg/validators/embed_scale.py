"""``embed-scale``: a host-side embedding lookup must scale like the model's embedding class.

Gemma's embedding multiplies its output by √hidden_size inside the model (Gemma3/4
TextScaledWordEmbedding). A slim deploy that looks embeddings up on the host inherits that
multiplication; a plain lookup feeds the device vectors √hidden_size times too small (53× for
hidden 2816) and the model answers with a wall of spaces. Static: runs on any host.
"""

from __future__ import annotations

import math

from modelreg.clock import utcnow
from modelreg.schemas.verification import CheckResult, Outcome
from modelreg.validators.base import CheckContext, finish

# Families whose embedding class scales its output by sqrt(hidden_size).
SQRT_HIDDEN_FAMILIES = (
    "gemma",
    "gemma2",
    "gemma3",
    "gemma3_text",
    "gemma3n",
    "gemma4",
    "gemma4_text",
    "recurrent_gemma",
    "paligemma",
)
BF16_RELATIVE_ERROR = 2**-8  # a scale stored or applied in bf16 is this close


def expected_scale(architecture: str | None, hidden_size: int) -> tuple[float, str]:
    if architecture and architecture.lower() in SQRT_HIDDEN_FAMILIES:
        return math.sqrt(hidden_size), f"{architecture} scales embeddings by √{hidden_size}"
    return 1.0, f"{architecture or 'this family'} does not scale its embeddings"


class EmbedScaleCheck:
    name = "embed-scale"

    def run(self, ctx: CheckContext) -> CheckResult:
        started = utcnow()
        facts = ctx.record.manifest.neuron
        embedding = facts.host_embedding if facts else None
        if embedding is None:
            return finish(
                self.name,
                started,
                Outcome.SKIPPED,
                "no host-side embedding lookup: the embedding runs inside the model",
            )
        arch = ctx.record.manifest.architecture
        hidden = embedding.hidden_size or arch.embedding_length
        evidence = {
            "architecture": arch.architecture,
            "hidden_size": hidden,
            "declared_scale": embedding.scale,
            "embedding_file": embedding.file,
        }
        if hidden is None:
            return finish(
                self.name,
                started,
                Outcome.UNAVAILABLE,
                "hidden size unknown: cannot tell the scale the host must apply",
                evidence,
            )
        want, why = expected_scale(arch.architecture, hidden)
        evidence |= {"expected_scale": want, "rule": why}
        if embedding.scale is None:
            return finish(
                self.name,
                started,
                Outcome.FAIL,
                f"host embedding scale not declared; {why}: declare {want:.4f}",
                evidence,
                classification="missing_scale",
            )
        if abs(embedding.scale - want) > want * BF16_RELATIVE_ERROR:
            factor = want / embedding.scale
            return finish(
                self.name,
                started,
                Outcome.FAIL,
                f"host embedding scale {embedding.scale:g} but {why} = {want:.4f}: "
                f"the device would get vectors {factor:.1f}× too small",
                evidence,
                classification="wrong_scale",
            )
        return finish(
            self.name,
            started,
            Outcome.PASS,
            f"host embedding scale {embedding.scale:.4f} matches ({why})",
            evidence,
        )
