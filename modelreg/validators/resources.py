"""What a runtime child used: its peak memory, and speed figures summed over one run.

The child measures (``peak_rss_bytes`` from its own ``VmHWM``; per generation ``ttft_ms``,
``prompt_eval_tokens`` / ``prompt_ms``, ``decode_tokens`` / ``decode_ms``); the parent turns the
response into one ``Resources``. Light on purpose: runtime children import it.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # runtime children import this module: keep pydantic out of their start-up
    from modelreg.schemas.suite import Resources, Traffic


def peak_rss_bytes(status: Path = Path("/proc/self/status")) -> int | None:
    """This process's peak resident set (VmHWM). Not ``ru_maxrss``: that survives ``execve``
    and would report whatever the process was before it became the runtime child."""
    try:
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def mapped_libraries(maps: Path = Path("/proc/self/maps")) -> list[str]:
    """Every shared object this process has mapped (after the model loaded: what the runtime
    really runs with, plugins and BLAS included), as absolute paths."""
    found = set()
    try:
        for line in maps.read_text().splitlines():
            parts = line.split(maxsplit=5)
            if len(parts) == 6 and parts[5].startswith("/"):
                path = parts[5].strip()
                name = path.rsplit("/", 1)[-1]
                if ".so" in name and not path.endswith(" (deleted)"):
                    found.add(path)
    except OSError:
        return []
    return sorted(found)


def percentile(values: list[float], q: float) -> float | None:
    """The nearest-rank ``q`` percentile (0 < q ≤ 100) of ``values`` — a value that was
    measured, never an interpolation between two (None: nothing measured)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))  # ceil(n·q/100)
    return round(ordered[int(rank) - 1], 2)


def _per_second(tokens: float, ms: float) -> float | None:
    return round(tokens / (ms / 1000), 2) if tokens > 0 and ms > 0 else None


def resources_from_response(response: dict[str, Any]) -> Resources:
    """Sum a child's ``ok`` response into run-level figures (absent figures stay None)."""
    from modelreg.schemas.suite import Resources

    generations = response.get("generations") or []
    ttfts = [g["ttft_ms"] for g in generations if g.get("ttft_ms") is not None]
    prompt_tokens = sum(g.get("prompt_eval_tokens") or 0 for g in generations)
    prompt_ms = sum(g.get("prompt_ms") or 0.0 for g in generations)
    decode_tokens = sum(g.get("decode_tokens") or 0 for g in generations)
    decode_ms = sum(g.get("decode_ms") or 0.0 for g in generations)
    used = [(g.get("prompt_tokens") or 0) + (g.get("completion_tokens") or 0) for g in generations]
    return Resources(
        peak_rss_bytes=response.get("peak_rss_bytes"),
        load_ms=response.get("load_ms"),
        ttft_ms_max=max(ttfts) if ttfts else None,
        ttft_ms_median=round(statistics.median(ttfts), 2) if ttfts else None,
        ttft_ms_p95=percentile(ttfts, 95),
        prompt_tokens_per_s=_per_second(prompt_tokens, prompt_ms),
        decode_tokens_per_s=_per_second(decode_tokens, decode_ms),
        context_used_tokens=max(used) if used and max(used) > 0 else None,
        context_tokens=response.get("n_ctx"),
    )


def traffic_figures(raw: dict[str, Any] | None, plan: Any) -> Traffic:
    """A runtime's answer to a suite's latency plan (``raw``: ``status``, ``requests`` — each
    with ``ttft_ms``, ``decode_tokens``, ``decode_ms``, ``completion_tokens`` — ``wall_ms``,
    ``batching``, ``max_in_flight``) as figures; ``not_run`` when the runtime ran none."""
    from modelreg.schemas.suite import Traffic

    asked = {"warmup": plan.warmup, "repeat": plan.repeat, "concurrency": plan.concurrency}
    if not raw:
        return Traffic(status="not_run", reason="this runtime ran no traffic", **asked)
    if raw.get("status") != "ok":
        return Traffic(
            status="error" if raw.get("status") == "error" else "not_run",
            reason=str(raw.get("message") or raw.get("reason") or "no traffic measured")[:500],
            batching=raw.get("batching"),
            **asked,
        )
    requests = raw.get("requests") or []
    ttfts = [r["ttft_ms"] for r in requests if r.get("ttft_ms") is not None]
    rates = [
        tokens / (ms / 1000)
        for r in requests
        if (tokens := r.get("decode_tokens") or 0) > 0 and (ms := r.get("decode_ms") or 0) > 0
    ]
    generated = sum(r.get("completion_tokens") or 0 for r in requests)
    wall_ms = raw.get("wall_ms")
    return Traffic(
        status="ok",
        requests=len(requests),
        batching=raw.get("batching"),
        ttft_ms_p50=percentile(ttfts, 50),
        ttft_ms_p95=percentile(ttfts, 95),
        ttft_ms_max=max(ttfts) if ttfts else None,
        decode_tokens_per_s_p50=percentile(rates, 50),
        decode_tokens_per_s_min=round(min(rates), 2) if rates else None,
        throughput_tokens_per_s=_per_second(generated, wall_ms) if wall_ms else None,
        max_in_flight=raw.get("max_in_flight"),
        wall_ms=wall_ms,
        **asked,
    )


def with_traffic(resources: Resources, raw: dict[str, Any] | None, plan: Any) -> Resources:
    """``resources`` of a run whose suite asks for traffic (``plan``): its TTFT figures and
    decode rate are the traffic's — none when the runtime ran no traffic (a gate on them is
    then unmeasured, never judged on the single batched run)."""
    traffic = traffic_figures(raw, plan)
    return resources.model_copy(
        update={
            "traffic": traffic,
            "ttft_ms_max": traffic.ttft_ms_max,
            "ttft_ms_median": traffic.ttft_ms_p50,
            "ttft_ms_p95": traffic.ttft_ms_p95,
            "decode_tokens_per_s": traffic.decode_tokens_per_s_p50,
        }
    )
