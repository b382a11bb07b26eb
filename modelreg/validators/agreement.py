"""Agreement with a reference: does the candidate make the same next-token decisions?

Perplexity hides where a quantized or converted model goes wrong; the decision loss does not.
Both models read the same fixed text (``data/agreement.txt``, the first 256 tokens), each in
its own runtime child — llama.cpp for a GGUF (``logits_all``), transformers for a checkpoint —
and write the next-token logits at every position. Compared here:

- **top-1 agreement**: the share of positions where greedy decoding picks the same token;
- **mean KL**: KL(reference ‖ candidate) of the next-token distributions, in nats, averaged.

The two must share a tokenizer: the candidate's token ids are fed to the reference, and both
tokenizations of the text are compared first (a difference is a finding, not a figure).
"""

from __future__ import annotations

import hashlib
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from modelreg import host
from modelreg.schemas.suite import AgreementFigures, GateOutcome, Suite
from modelreg.schemas.verification import CheckResult, Outcome
from modelreg.validators.base import finish
from modelreg.validators.child import ChildRun, RuntimeChild
from modelreg.validators.llama_child import CHILD_ARGV as LLAMA_CHILD_ARGV
from modelreg.validators.transformers_child import CHILD_ARGV as TRANSFORMERS_CHILD_ARGV

AGREEMENT_TEXT = Path(__file__).resolve().parents[1] / "data" / "agreement.txt"
DEFAULT_TOKENS = 256
ROWS_PER_CHUNK = 32  # positions compared at a time: bounded memory for 262k-token vocabularies

Runtime = Literal["llama.cpp", "transformers"]


@dataclass(frozen=True)
class AgreementSide:
    """One model to compare: a GGUF file through llama.cpp or a checkpoint directory through
    transformers (``dtype``: the compute dtype; float32 by default, so that a bf16 reference
    is read exactly as stored rather than rounded again at every layer)."""

    runtime: Runtime
    path: Path
    dtype: str | None = None

    def describe(self) -> str:
        dtype = f" ({self.dtype or 'float32'})" if self.runtime == "transformers" else ""
        return f"{self.runtime}{dtype}"


@dataclass
class AgreementRun:
    """The figures, or why there are none (``problem`` with a ``classification``: load_error,
    crashed, timeout, no_runtime, tokenizer_mismatch); ``evidence`` keeps both children's."""

    figures: AgreementFigures | None
    problem: str | None = None
    classification: str | None = None
    evidence: dict[str, Any] = field(default_factory=dict)


def _request(side: AgreementSide, spec: dict[str, Any], threads: int) -> dict[str, Any]:
    if side.runtime == "llama.cpp":
        return {
            "model_path": str(side.path),
            "prompts": [],
            "n_ctx": spec["n_tokens"],
            "n_threads": threads,
            "max_tokens": 1,
            "seed": 0,
            "host_flags": sorted(host.cpu_flags()),
            "load": True,
            "logits": spec,
        }
    return {
        "model_dir": str(side.path),
        "prompts": [],
        "threads": threads,
        "dtype": side.dtype or "float32",
        "logits": spec,
    }


def _argv(side: AgreementSide) -> tuple[str, ...]:
    return LLAMA_CHILD_ARGV if side.runtime == "llama.cpp" else TRANSFORMERS_CHILD_ARGV


def _child_problem(run: ChildRun, side: AgreementSide, role: str) -> tuple[str, str] | None:
    """(classification, message) when a child gave no logits."""
    response = run.response or {}
    if run.status == "timeout":
        return "timeout", f"{role} ({side.describe()}): {run.describe()}"
    if run.status != "ok":
        return "crashed", f"{role} ({side.describe()}): {run.describe()}"
    status = response.get("status")
    if status == "ok" and "logits" in response:
        return None
    if status == "no_runtime":
        return "no_runtime", f"{role}: {response.get('message')}"
    detail = (response.get("log_errors") or [response.get("message") or status])[-1]
    return "load_error", f"{role} ({side.describe()}) could not load {side.path}: {detail}"


def compare_logits(candidate: Any, reference: Any) -> tuple[float, float, float]:
    """(top-1 agreement, mean KL(reference ‖ candidate), max KL) of two [positions, vocab]
    logit arrays."""
    import numpy as np

    def log_softmax(rows: Any) -> Any:
        rows = rows.astype(np.float64)
        shifted = rows - rows.max(axis=1, keepdims=True)
        return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))

    positions = candidate.shape[0]
    same = 0
    kls = []
    for start in range(0, positions, ROWS_PER_CHUNK):
        cand = candidate[start : start + ROWS_PER_CHUNK]
        ref = reference[start : start + ROWS_PER_CHUNK]
        same += int((cand.argmax(axis=1) == ref.argmax(axis=1)).sum())
        log_p, log_q = log_softmax(ref), log_softmax(cand)
        kls.extend((np.exp(log_p) * (log_p - log_q)).sum(axis=1).tolist())
    return same / positions, float(np.mean(kls)), float(np.max(kls))


def _first_difference(a: list[int], b: list[int]) -> int:
    return next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )


def measure_agreement(
    candidate: AgreementSide,
    reference: AgreementSide,
    *,
    text: str | None = None,
    n_tokens: int = DEFAULT_TOKENS,
    threads: int = 2,
    timeout: float = 300.0,
) -> AgreementRun:
    """Compare ``candidate`` with ``reference`` on ``text`` (default: the bundled text) over
    its first ``n_tokens`` tokens. Both children start at once, so the reference's imports
    overlap the candidate's run; the reference then reads the candidate's token ids."""
    import numpy as np

    started = time.perf_counter()
    text = text if text is not None else AGREEMENT_TEXT.read_text(encoding="utf-8")
    text_sha256 = hashlib.sha256(text.encode()).hexdigest()
    reference_child = RuntimeChild(_argv(reference))
    candidate_child = RuntimeChild(_argv(candidate))
    with tempfile.TemporaryDirectory(prefix="modelreg-agreement-") as scratch:
        spec = {"text": text, "n_tokens": n_tokens, "path": str(Path(scratch) / "candidate.npy")}
        try:
            # The reference child is importing torch on one core meanwhile: a candidate that
            # competed for it ran 3× slower here (1.2 s alone, 3.4 s beside the import).
            cand_threads = max(1, threads // 2)
            cand_run = candidate_child.exchange(_request(candidate, spec, cand_threads), timeout)
            evidence: dict[str, Any] = {"candidate": _side_evidence(cand_run)}
            problem = _child_problem(cand_run, candidate, "candidate")
            if problem is not None:
                return AgreementRun(None, problem[1], problem[0], evidence)
            cand_logits = cand_run.response["logits"]  # type: ignore[index]
            ref_spec = spec | {
                "path": str(Path(scratch) / "reference.npy"),
                "token_ids": cand_logits["token_ids"],
            }
            ref_run = reference_child.exchange(_request(reference, ref_spec, threads), timeout)
        finally:
            candidate_child.discard()
            reference_child.discard()
        evidence["reference"] = _side_evidence(ref_run)
        problem = _child_problem(ref_run, reference, "reference")
        if problem is not None:
            return AgreementRun(None, problem[1], problem[0], evidence)
        ref_logits = ref_run.response["logits"]  # type: ignore[index]
        ours, theirs = cand_logits["text_token_ids"], ref_logits["text_token_ids"]
        if ours != theirs:
            at = _first_difference(ours, theirs)
            return AgreementRun(
                None,
                f"the tokenizers differ at token {at} of the text "
                f"(candidate {ours[at : at + 3]}, reference {theirs[at : at + 3]}): "
                "agreement needs a reference with the same tokenizer",
                "tokenizer_mismatch",
                evidence,
            )
        cand = np.load(cand_logits["path"])
        ref = np.load(ref_logits["path"])
    vocab = min(cand.shape[1], ref.shape[1])
    top1, mean_kl, max_kl = compare_logits(cand[:, :vocab], ref[:, :vocab])
    evidence["vocab"] = {"candidate": int(cand.shape[1]), "reference": int(ref.shape[1])}
    figures = AgreementFigures(
        tokens=int(cand.shape[0]),
        top1_agreement=round(top1, 4),
        mean_kl=round(mean_kl, 5),
        max_kl=round(max_kl, 4),
        candidate_runtime=candidate.describe(),
        reference_runtime=reference.describe(),
        reference_dtype=reference.dtype
        or ("float32" if reference.runtime == "transformers" else None),
        text_sha256=text_sha256,
        wall_ms=round((time.perf_counter() - started) * 1000, 1),
    )
    return AgreementRun(figures, evidence=evidence)


def _side_evidence(run: ChildRun) -> dict[str, Any]:
    response = dict(run.response or {})
    logits = response.pop("logits", None)
    kept: dict[str, Any] = {
        key: response[key]
        for key in (
            "status",
            "message",
            "load_ms",
            "peak_rss_bytes",
            "llama_cpp_python_version",
            "transformers_version",
            "torch_version",
            "dtype",
        )
        if key in response
    }
    if logits is not None:
        kept["logits_ms"] = logits.get("logits_ms")
        kept["tokens"] = len(logits.get("token_ids", []))
    return run.evidence() | kept


AGREEMENT_CHECK = "reference-agreement"


def agreement_check(
    run: AgreementRun, suite: Suite, started: datetime, name: str = AGREEMENT_CHECK
) -> CheckResult:
    """The check result of a reference comparison, judged by ``suite``'s agreement gates.

    No figures: ``fail`` with the run's classification (``unavailable`` when a runtime is not
    installed here). A suite without ``min_top1_agreement`` / ``max_mean_kl`` cannot judge the
    figures, so the comparison fails closed (``no_threshold``) rather than pass unjudged.
    """
    from modelreg.validators.judge import agreement_gates

    evidence: dict[str, Any] = dict(run.evidence)
    evidence["suite"] = {"name": suite.name, "digest": suite.digest()}
    if run.figures is None:
        outcome = Outcome.UNAVAILABLE if run.classification == "no_runtime" else Outcome.FAIL
        classification = None if outcome is Outcome.UNAVAILABLE else run.classification
        return finish(name, started, outcome, run.problem or "no figures", evidence, classification)
    figures = run.figures
    evidence["agreement"] = figures.model_dump(mode="json")
    summary = (
        f"top-1 agreement {figures.top1_agreement:.1%}, mean KL {figures.mean_kl:.4f} nats over "
        f"{figures.tokens} tokens ({figures.candidate_runtime} vs {figures.reference_runtime})"
    )
    gates = agreement_gates(suite, figures)
    evidence["gates"] = [g.model_dump(mode="json") for g in gates]
    if not gates:
        return finish(
            name,
            started,
            Outcome.FAIL,
            f"{summary} — suite {suite.name} sets no min_top1_agreement or max_mean_kl to judge "
            "them by: add them to the suite",
            evidence,
            "no_threshold",
        )
    failed = [g.message for g in gates if g.outcome is not GateOutcome.PASS]
    if failed:
        return finish(
            name, started, Outcome.FAIL, f"{summary} — {'; '.join(failed)}", evidence, "disagrees"
        )
    return finish(name, started, Outcome.PASS, summary, evidence)
