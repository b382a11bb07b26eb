"""The release gate's cost: the default chat suite vs the single Paris check, and agreement.

- Suite: ``Registry.verify`` of SmolLM2 on ``cpu`` with the default chat suite (15 cases through
  one loaded model) vs with the built-in Paris check, alternated in one run, median of 5. Both
  include re-hashing, the child's start-up and model load, and writing the run to SQLite.
- Agreement: ``measure_agreement`` of SmolLM2 Q4_1 (llama.cpp) against its bf16 conversion
  (transformers, float32) over the first 256 tokens of the bundled text, median of 3.
"""

from __future__ import annotations

import time
from typing import Any

from benchmarks.common import WORK
from modelreg.bundled import SMOLLM2_MODEL_ID, SMOLLM2_PACKAGE, smollm2_gguf, smollm2_safetensors

MODEL_CACHE = WORK.parent.parent / ".cache" / "models"


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def _suite_vs_paris(repeat: int = 5) -> dict[str, Any]:
    import modelreg
    from modelreg.suites import default_suite
    from modelreg.validators.base import VerifyOptions

    WORK.mkdir(parents=True, exist_ok=True)
    database = WORK / "suite-bench.db"
    database.unlink(missing_ok=True)
    registry = modelreg.open(f"sqlite:///{database}", targets_file=WORK / "no-targets.yaml")
    added = registry.add(
        [smollm2_gguf()], model_id=SMOLLM2_MODEL_ID, source=f"pypi://{SMOLLM2_PACKAGE}"
    )
    record = added.record.record_id
    suite = default_suite()
    timings: dict[str, list[float]] = {"suite": [], "paris": []}
    summary = ""
    for _ in range(repeat):
        for name, options in (("paris", VerifyOptions()), ("suite", VerifyOptions(suite=suite))):
            started = time.perf_counter()
            report = registry.verify(record, "cpu", options=options, actor="bench")
            timings[name].append(time.perf_counter() - started)
            smoke = next(r for r in report.checks if r.check == "gguf-cpu-smoke")
            if name == "suite":
                summary = smoke.summary
    ours, theirs = _median(timings["suite"]), _median(timings["paris"])
    return {
        "name": f"verify SmolLM2 with the default chat suite ({len(suite.cases)} cases) vs the "
        "single Paris check (one model load each)",
        "ours_s": ours,
        "theirs_s": theirs,
        "ratio": ours / theirs,
        "detail": f"{ours:.2f} s vs {theirs:.2f} s (median of {repeat}, alternated); {summary}",
        "target": "≤ 3× the Paris check",
        "met": ours / theirs <= 3,
    }


def _agreement(repeat: int = 3) -> dict[str, Any]:
    from modelreg.validators.agreement import AgreementSide, measure_agreement

    candidate = AgreementSide("llama.cpp", smollm2_gguf())
    reference = AgreementSide("transformers", smollm2_safetensors(MODEL_CACHE))
    walls, figures = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        run = measure_agreement(candidate, reference)
        walls.append(time.perf_counter() - started)
        assert run.figures is not None, run.problem
        figures = run.figures
    wall = _median(walls)
    assert figures is not None
    return {
        "name": "agreement over 256 tokens: SmolLM2 Q4_1 (llama.cpp) vs bf16 (transformers)",
        "ours_s": wall,
        "theirs_s": None,
        "ratio": None,
        "detail": f"{wall:.2f} s wall (median of {repeat}; both children, imports included); "
        f"top-1 agreement {figures.top1_agreement:.3f}, mean KL {figures.mean_kl:.4f} nats, "
        f"max KL {figures.max_kl:.3f}",
        "target": "≤ 10 s",
        "met": wall <= 10,
    }


def run() -> list[dict[str, Any]]:
    return [_suite_vs_paris(), _agreement()]


if __name__ == "__main__":
    for result in run():
        print(result)
