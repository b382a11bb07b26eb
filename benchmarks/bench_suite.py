"""The release gate's cost: the default chat suite vs the single Paris check, and agreement.

- Suite: ``Registry.verify`` of SmolLM2 on ``cpu`` with the default chat suite (15 cases through
  one loaded model) vs with the built-in Paris check, alternated in one run, median of 5. Both
  include re-hashing, the child's start-up and model load, and writing the run to SQLite.
- Physical limit: the same suite through ``Registry.verify`` vs the same 15 prompts run by a
  bare llama-cpp-python script doing only the batched greedy decode (load, chat template,
  one prefill with a shared prefix evaluated once, one ``llama_decode`` per step), timed as a
  whole process, alternated, median of 5.
- Agreement: ``measure_agreement`` of SmolLM2 Q4_1 (llama.cpp) against its bf16 conversion
  (transformers, float32) over the first 256 tokens of the bundled text, median of 3.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

from benchmarks.common import WORK
from modelreg.bundled import (
    SMOLLM2_BASE,
    SMOLLM2_MODEL_ID,
    SMOLLM2_PACKAGE,
    smollm2_gguf,
    smollm2_safetensors,
)

MODEL_CACHE = WORK.parent.parent / ".cache" / "models"


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def _smollm2_registry(name: str) -> tuple[Any, str]:
    """A fresh SQLite registry under WORK holding the bundled SmolLM2 GGUF, and its record."""
    import modelreg

    WORK.mkdir(parents=True, exist_ok=True)
    database = WORK / name
    database.unlink(missing_ok=True)
    registry = modelreg.open(f"sqlite:///{database}")
    added = registry.add(
        [smollm2_gguf()],
        model_id=SMOLLM2_MODEL_ID,
        source=f"pypi://{SMOLLM2_PACKAGE}",
        base_model=SMOLLM2_BASE,
    )
    return registry, added.record.record_id


def _suite_vs_paris(repeat: int = 5) -> dict[str, Any]:
    from modelreg.suites import default_suite
    from modelreg.validators.base import VerifyOptions

    registry, record = _smollm2_registry("suite-bench.db")
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


# What llama-cpp-python alone does for a suite: no registry, no judge, no evidence. Reads
# {"model": path, "prompts": [{"prompt", "max_tokens"}]} on stdin.
BARE_BATCHED_SCRIPT = r"""
import json, sys
import numpy as np
import llama_cpp
from llama_cpp.llama_chat_format import Jinja2ChatFormatter
spec = json.load(sys.stdin)
llm = llama_cpp.Llama(model_path=spec["model"], n_ctx=512, n_threads=2, verbose=False)
eos, bos = llm.token_eos(), llm.token_bos()
fmt = Jinja2ChatFormatter(llm.metadata["tokenizer.chat_template"],
                          llm._model.token_get_text(eos), llm._model.token_get_text(bos))
prompts, budgets = [], []
for case in spec["prompts"]:
    r = fmt(messages=[{"role": "user", "content": case["prompt"]}])
    prompts.append(llm.tokenize(r.prompt.encode(), add_bos=not r.added_special, special=True))
    budgets.append(case["max_tokens"])
n = len(prompts)
params = llama_cpp.llama_context_params.from_buffer_copy(llm.context_params)
# Each sequence its own cells (kv_unified off): room for the longest prompt and its budget.
per_seq = -(-max(len(p) + b + 8 for p, b in zip(prompts, budgets)) // 256) * 256
params.n_ctx = per_seq * n
params.n_batch = params.n_ubatch = sum(map(len, prompts))
params.n_seq_max, params.kv_unified = n, False
ctx = llama_cpp.llama_init_from_model(llm.model, params)
mem = llama_cpp.llama_get_memory(ctx)
batch = llama_cpp.llama_batch_init(params.n_batch, 0, 1)
vocab = llm._model.vocab
n_vocab = llama_cpp.llama_vocab_n_tokens(vocab)
def decode(entries):
    for i, (tok, pos, seq, want) in enumerate(entries):
        batch.token[i], batch.pos[i], batch.n_seq_id[i] = tok, pos, 1
        batch.seq_id[i][0], batch.logits[i] = seq, want
    batch.n_tokens = len(entries)
    assert llama_cpp.llama_decode(ctx, batch) == 0
def pick(i):
    return int(np.argmax(np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, i), (n_vocab,))))
shared = 0
while shared < min(map(len, prompts)) - 1 and len({p[shared] for p in prompts}) == 1:
    shared += 1
if shared:
    decode([(t, i, 0, False) for i, t in enumerate(prompts[0][:shared])])
    for s in range(1, n):
        llama_cpp.llama_memory_seq_cp(mem, 0, s, -1, -1)
entries, rows = [], []
for s, p in enumerate(prompts):
    entries += [(p[i], i, s, i == len(p) - 1) for i in range(shared, len(p))]
    rows.append(len(entries) - 1)
decode(entries)
outs = [[] for _ in prompts]
live = []
for s in range(n):
    tok = pick(rows[s])
    if not llama_cpp.llama_vocab_is_eog(vocab, tok):
        outs[s].append(tok)
        if len(outs[s]) < budgets[s]:
            live.append(s)
while live:
    decode([(outs[s][-1], len(prompts[s]) + len(outs[s]) - 1, s, True) for s in live])
    still = []
    for row, s in enumerate(live):
        tok = pick(row)
        if not llama_cpp.llama_vocab_is_eog(vocab, tok):
            outs[s].append(tok)
            if len(outs[s]) < budgets[s]:
                still.append(s)
    live = still
print(json.dumps([llm.detokenize(o, prev_tokens=p).decode("utf-8", "ignore")
                  for o, p in zip(outs, prompts)]))
"""


def _bare_batched_suite(spec: dict[str, Any]) -> tuple[float, list[str]]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", BARE_BATCHED_SCRIPT],
        input=json.dumps(spec),
        capture_output=True,
        text=True,
        check=True,
    )
    return time.perf_counter() - started, json.loads(done.stdout.strip().splitlines()[-1])


def _suite_vs_bare_batched(repeat: int = 5) -> dict[str, Any]:
    from modelreg.suites import default_suite
    from modelreg.validators.base import VerifyOptions

    registry, record = _smollm2_registry("suite-bare-bench.db")
    suite = default_suite()
    # The prompts verify asks: a long-context case's input sized for the model's context.
    context_length = registry.get(record).manifest.architecture.context_length
    spec = {
        "model": str(smollm2_gguf()),
        "prompts": [
            {"prompt": c.prompt_for(context_length), "max_tokens": c.max_tokens}
            for c in suite.cases
        ],
    }
    timings: dict[str, list[float]] = {"suite": [], "bare": []}
    same = True
    for _ in range(repeat):
        started = time.perf_counter()
        report = registry.verify(record, "cpu", options=VerifyOptions(suite=suite), actor="bench")
        timings["suite"].append(time.perf_counter() - started)
        wall, outputs = _bare_batched_suite(spec)
        timings["bare"].append(wall)
        smoke = next(r for r in report.checks if r.check == "gguf-cpu-smoke")
        ours_outputs = [g.get("output") for g in smoke.evidence.get("generations") or []]
        same = same and (not ours_outputs or ours_outputs == outputs)
    ours, theirs = _median(timings["suite"]), _median(timings["bare"])
    return {
        "name": f"verify SmolLM2 with the default chat suite ({len(suite.cases)} cases) vs a bare "
        "batched llama-cpp-python script decoding the same prompts (physical limit)",
        "ours_s": ours,
        "theirs_s": theirs,
        "ratio": ours / theirs,
        "detail": f"{ours:.2f} s vs {theirs:.2f} s (whole processes for the script; median of "
        f"{repeat}, alternated); outputs {'identical' if same else 'DIFFER'}",
        "target": "state the ratio",
        "met": None,
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
    return [_suite_vs_paris(), _suite_vs_bare_batched(), _agreement()]


if __name__ == "__main__":
    for result in run():
        print(result)
