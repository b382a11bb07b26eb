"""Which figures of an endpoint run are believed: measured on the stream, and below what the
target's hardware can reach for the record's weights.

A canned answer streamed from a 30-line fake server (issue 22: "Paris" at 33,333 tok/s) is
refused by its speed: decode tokens/s above ``decode_ceiling`` is ``implausible_figures``.
"""

from __future__ import annotations

import statistics
from typing import Any

from modelreg import units
from modelreg.schemas.suite import Resources
from modelreg.validators.base import CheckContext
from modelreg.validators.identity import required_files
from modelreg.validators.openai_client import Answer
from modelreg.validators.resources import percentile

# Decode tokens/s no runtime reaches on a target's hardware; a figure above it is not believed.
# Decoding one stream reads every weight once per token, so tokens/s is at most memory
# bandwidth / weight bytes. The bandwidths are above the fastest hardware of each kind:
# - cpu: 1.25 TB/s. A dual-socket server with 12 channels of DDR5-6400 per socket peaks at
#   2 x 12 x 51.2 GB/s = 1.23 TB/s; a desktop has about 0.1 TB/s.
# - neuron: 50 TB/s. trn2.48xlarge: 16 Trainium2 chips x 2.9 TB/s = 46 TB/s (inf2.48xlarge:
#   12 Inferentia2 chips x 0.82 TB/s = 9.8 TB/s).
# DECODE_HEADROOM: speculative decoding (several tokens accepted per pass), a mixture of experts
# (only the active experts are read: Qwen3-30B-A3B reads a tenth of its weights per token) and
# weights held in cache each let a runtime beat one full read per token; 16x covers them.
# DECODE_TOKENS_PER_S_MAX: whatever the size, a stream cannot go faster than one forward pass
# per token, every layer in turn. On a cpu host 5,000 tok/s is 0.2 ms per pass: about 100x
# what llama.cpp does with the 135M SmolLM2 of the tests on one core of the test machine
# (45 tok/s), the smallest model this registry has seen; neuron gets 4x that. The fake server
# of issue 22 streamed its canned "Paris" at 33,333 tok/s.
MEMORY_BANDWIDTH_MAX = {"cpu": 1.25e12, "neuron": 50e12}
DECODE_HEADROOM = 16
DECODE_TOKENS_PER_S_MAX = {"cpu": 5_000.0, "neuron": 20_000.0}


def weight_bytes(ctx: CheckContext) -> int | None:
    """The bytes of the record's weights (None when a size is unknown)."""
    sizes = [f.bytes for f in required_files(ctx.record)]
    return sum(s for s in sizes if s is not None) if None not in sizes else None


def decode_ceiling(kind: str, weights: int | None) -> float:
    """The decode tokens/s above which one stream's figure is not believed on a ``kind``
    target serving ``weights`` bytes (see DECODE_HEADROOM)."""
    ceiling = DECODE_TOKENS_PER_S_MAX.get(kind, max(DECODE_TOKENS_PER_S_MAX.values()))
    bandwidth = MEMORY_BANDWIDTH_MAX.get(kind)
    if weights and bandwidth:
        ceiling = min(ceiling, bandwidth * DECODE_HEADROOM / weights)
    return round(ceiling, 1)


def implausible_figures(kind: str, weights: int | None, resources: Resources) -> list[str]:
    """The figures of ``resources`` no ``kind`` host reaches for ``weights`` bytes of weights
    (empty when every one is believed)."""
    ceiling = decode_ceiling(kind, weights)
    measured = resources.decode_tokens_per_s
    if measured is None or measured <= ceiling:
        return []
    size = f" for {weights / 1e6:.0f} MB of weights" if weights else ""
    return [
        f"decode {units.rate(measured)}, above the {units.rate(ceiling)} no {kind} host "
        f"reaches{size}"
    ]


def stream_figures(answers: list[tuple[str, Answer]]) -> dict[str, Any]:
    """Run-level figures measured on the stream: TTFT, decode tokens/s (tokens after the
    first over the time from the first to the last)."""
    ttfts = [a.ttft_ms for _, a in answers if a.ttft_ms is not None]
    tokens = sum(
        (a.completion_tokens or 0) - 1
        for _, a in answers
        if a.decode_ms and (a.completion_tokens or 0) > 1
    )
    ms = sum(
        a.decode_ms or 0.0 for _, a in answers if a.decode_ms and (a.completion_tokens or 0) > 1
    )
    return {
        "ttft_ms_max": max(ttfts) if ttfts else None,
        "ttft_ms_median": round(statistics.median(ttfts), 2) if ttfts else None,
        "ttft_ms_p95": percentile(ttfts, 95),
        "decode_tokens_per_s": round(tokens / (ms / 1000), 2) if tokens > 0 and ms > 0 else None,
    }
