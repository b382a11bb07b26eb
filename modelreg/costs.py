"""What generated tokens cost on a target: dollars and watt-hours per 1,000 tokens.

A target may declare what one of its hosts costs (``cost_per_hour_usd``) and draws
(``power_watts``); a run measures how fast it generated. Seed 002 compares boxes by price,
power and measured speed together ("장비 가격만 있는 비교표와 model benchmark만 있는 표를
합쳐야 전체 비용과 위험을 볼 수 있습니다"): only a declared price and a measured rate give a
cost, never a guessed one.

The rate is the run's generation throughput when its suite asked for traffic (tokens generated
over the measured phase's wall time: requests in flight together share the host's hour),
else the decode rate of one stream. Which one is said in the figures (``rate_basis``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from modelreg import units

if TYPE_CHECKING:
    from modelreg.schemas.suite import Resources
    from modelreg.targets import Target

SECONDS_PER_HOUR = 3600.0
TOKENS_PER_UNIT = 1000  # figures are per 1,000 generated tokens


def generation_rate(resources: Resources) -> tuple[float | None, str]:
    """(tokens generated per second, what that rate is)."""
    traffic = resources.traffic
    if traffic is not None and traffic.throughput_tokens_per_s:
        return traffic.throughput_tokens_per_s, (
            f"throughput of {traffic.requests} requests, {traffic.concurrency} in flight"
        )
    if resources.decode_tokens_per_s:
        return resources.decode_tokens_per_s, "decode rate of one stream"
    return None, "no generation rate measured"


def usd_per_1k_tokens(cost_per_hour_usd: float, tokens_per_s: float) -> float:
    """Dollars per 1,000 generated tokens on a host of ``cost_per_hour_usd`` at
    ``tokens_per_s``."""
    return cost_per_hour_usd / SECONDS_PER_HOUR / tokens_per_s * TOKENS_PER_UNIT


def wh_per_1k_tokens(power_watts: float, tokens_per_s: float) -> float:
    """Watt-hours per 1,000 generated tokens on a host drawing ``power_watts`` at
    ``tokens_per_s``."""
    return power_watts * (TOKENS_PER_UNIT / tokens_per_s) / SECONDS_PER_HOUR


def run_cost(target: Target | None, resources: Resources | None) -> dict[str, Any] | None:
    """The cost figures of a run on ``target`` (None when the target declares neither a price
    nor a power draw). ``usd_per_1k_tokens`` / ``wh_per_1k_tokens`` are None when the run
    measured no generation rate."""
    if target is None or (target.cost_per_hour_usd is None and target.power_watts is None):
        return None
    rate, basis = generation_rate(resources) if resources is not None else (None, "no run")
    figures: dict[str, Any] = {
        "target": target.name,
        "cost_per_hour_usd": target.cost_per_hour_usd,
        "power_watts": target.power_watts,
        "tokens_per_s": rate,
        "rate_basis": basis,
        "usd_per_1k_tokens": None,
        "wh_per_1k_tokens": None,
    }
    if rate:
        if target.cost_per_hour_usd is not None:
            figures["usd_per_1k_tokens"] = round(
                usd_per_1k_tokens(target.cost_per_hour_usd, rate), 6
            )
        if target.power_watts is not None:
            figures["wh_per_1k_tokens"] = round(wh_per_1k_tokens(target.power_watts, rate), 3)
    return figures


def describe_cost(figures: dict[str, Any] | None) -> str | None:
    """One phrase for a check's summary: ``$0.0406 and 26.7 Wh per 1k tokens ($0.76/h, 500 W
    at 5.2 tok/s)``; None when there is nothing to say."""
    if not figures or figures.get("tokens_per_s") is None:
        return None
    amounts = []
    if figures.get("usd_per_1k_tokens") is not None:
        amounts.append(f"${units.number(figures['usd_per_1k_tokens'], 4)}")
    if figures.get("wh_per_1k_tokens") is not None:
        amounts.append(f"{units.number(figures['wh_per_1k_tokens'])} Wh")
    declared = []
    if figures.get("cost_per_hour_usd") is not None:
        declared.append(f"${units.number(figures['cost_per_hour_usd'])}/h")
    if figures.get("power_watts") is not None:
        declared.append(f"{units.number(figures['power_watts'])} W")
    return (
        f"{' and '.join(amounts)} per 1k tokens ({', '.join(declared)} at "
        f"{units.rate(figures['tokens_per_s'])}, {figures['rate_basis']})"
    )
