"""Child process for the GGUF checks: probe the llama.cpp build, then (if asked and the host can
run it) load the model once and run every prompt through it greedily. Run as
``python -m modelreg.validators.llama_child``.

Request (stdin, JSON): model_path, prompts [{id, prompt, chat, max_tokens, expect}], n_ctx,
n_threads, max_tokens (default per prompt), seed, host_flags, load; optionally
``logits: {text, n_tokens, path, token_ids}`` to write the next-token logits of a fixed text
(see ``agreement``), and ``probe: {n_ctx, tokens, type_k, type_v, deadline_s}`` to measure a
served context after the generations (see ``llama_probe``), and ``traffic: {warmup, repeat,
concurrency, cases}`` to measure latency like traffic after them (see ``llama_traffic``).
Response (stdout, one JSON line): status is one of ``no_runtime``, ``incompatible``,
``probed``, ``load_error``, ``ok``, with versions, compiled system info, timings and the child's
peak RSS. Each generation carries its output, ``finish_reason`` (``stop`` / ``length``),
``stopped_by_eos`` and the end token, token counts, ``ttft_ms``, prompt and decode timings.
Every generation says ``batched`` and ``batch_size``.

A suite of more than one case runs batched unless the request says ``batched: false``: every
case is a sequence of one context beside the model's own (``llama_batched``, which says what
batching does to the figures).
With a probe, ``probe`` holds its ``status`` (``ok``, ``timeout`` or ``error``), tokens
evaluated, prompt ms and tokens/s, and the peak RSS of the probe's phase.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import deque
from typing import Any

from modelreg.validators.child import RuntimeChild, reserve_stdout, respond
from modelreg.validators.cpu_features import build_features, missing_flags
from modelreg.validators.llama_batched import (
    generate_batched,
    generation_fields,
    greedy_settings,
    wants_chat,
)
from modelreg.validators.llama_probe import log_errors, served_context_probe
from modelreg.validators.llama_traffic import latency_traffic
from modelreg.validators.resources import mapped_libraries, peak_rss_bytes

LOG_LINES_KEPT = 400
CHILD_ARGV = (sys.executable, "-m", "modelreg.validators.llama_child")


def prestart(memory_limit_bytes: int | None = None) -> Any:
    """A llama.cpp runtime child started now, waiting for its request: give it to
    ``Registry.verify(prestarted=…)`` so that llama_cpp imports while the registry is read
    (the verify uses it, or discards it when nothing runs)."""
    return RuntimeChild(CHILD_ARGV, memory_limit_bytes=memory_limit_bytes)


class _GreedyWatch:
    """A logits processor that changes nothing: it notes when the first token is about to be
    chosen (time to first token) and which token greedy decoding picks at each step — the last
    one is the token that ended the generation, which llama-cpp-python does not return."""

    def __init__(self, np: Any) -> None:
        self.np = np
        self.first_at: float | None = None
        self.last_token: int | None = None
        self.steps = 0

    def __call__(self, _input_ids: Any, scores: Any) -> Any:
        if self.first_at is None:
            self.first_at = time.perf_counter()
        self.last_token = int(self.np.argmax(scores))
        self.steps += 1
        return scores


def _generate(
    llm: Any,
    llama_cpp: Any,
    np: Any,
    item: dict[str, Any],
    request: dict[str, Any],
    has_template: bool,
) -> dict[str, Any]:
    use_chat = wants_chat(item, has_template)
    watch = _GreedyWatch(np)
    greedy = greedy_settings(item, request)
    max_tokens = greedy["max_tokens"]
    greedy["logits_processor"] = llama_cpp.LogitsProcessorList([watch])
    llama_cpp.llama_perf_context_reset(llm.ctx)
    started = time.perf_counter()
    # A chat turn asked of a model without a chat template gets the bare prompt, never a
    # template llama-cpp-python would guess; it is still judged as a turn that must end.
    if use_chat and has_template:
        reply = llm.create_chat_completion(
            messages=[{"role": "user", "content": item["prompt"]}], **greedy
        )
        text = reply["choices"][0]["message"]["content"] or ""
    else:
        reply = llm.create_completion(item["prompt"], **greedy)
        text = reply["choices"][0]["text"]
    wall_ms = (time.perf_counter() - started) * 1000
    perf = llama_cpp.llama_perf_context(llm.ctx)
    finish_reason = reply["choices"][0].get("finish_reason")
    vocab = llm._model.vocab
    end = watch.last_token
    stopped_by_eos = (
        finish_reason == "stop"
        and end is not None
        and bool(llama_cpp.llama_vocab_is_eog(vocab, end))
    )
    end_token = None
    if stopped_by_eos and end is not None:
        end_token = llama_cpp.llama_vocab_get_text(vocab, end).decode("utf-8", errors="replace")
    return generation_fields(item, use_chat, has_template) | {
        "output": text,
        "finish_reason": finish_reason,
        "stopped_by_eos": stopped_by_eos,
        "end_token": end_token,
        "max_tokens": max_tokens,
        "prompt_tokens": reply["usage"]["prompt_tokens"],
        "completion_tokens": reply["usage"]["completion_tokens"],
        # Tokens actually evaluated: llama-cpp-python reuses a cached common prefix.
        "prompt_eval_tokens": perf.n_p_eval,
        "prompt_ms": round(perf.t_p_eval_ms, 2),
        "decode_tokens": perf.n_eval,
        "decode_ms": round(perf.t_eval_ms, 2),
        "generation_ms": round(perf.t_eval_ms, 2),
        "ttft_ms": round((watch.first_at - started) * 1000, 2) if watch.first_at else None,
        "wall_ms": round(wall_ms, 2),
        "batched": False,
        "batch_size": 1,
    }


def _logits(llm: Any, np: Any, spec: dict[str, Any]) -> dict[str, Any]:
    """Next-token logits at every position of a fixed text, saved as float32 .npy."""
    started = time.perf_counter()
    own = llm.tokenize(spec["text"].encode("utf-8"), add_bos=False, special=False)
    ids = spec.get("token_ids") or llm.tokenize(spec["text"].encode("utf-8"))
    ids = list(ids)[: spec["n_tokens"]]
    llm.reset()
    llm.eval(ids)
    scores = np.asarray(llm.scores[: len(ids)], dtype=np.float32)
    np.save(spec["path"], scores)
    return {
        "token_ids": ids,
        "text_token_ids": own[: spec["n_tokens"]],
        "vocab": int(scores.shape[1]),
        "path": spec["path"],
        "logits_ms": round((time.perf_counter() - started) * 1000, 2),
    }


def main() -> int:
    out = reserve_stdout()
    started = time.perf_counter()
    # Import before reading the request: the parent may start us early (see RuntimeChild).
    try:
        import ctypes

        import llama_cpp
        import numpy as np
    except ImportError as exc:
        respond({"status": "no_runtime", "message": f"llama-cpp-python not importable: {exc}"}, out)
        return 0
    request = json.loads(sys.stdin.read())
    log: deque[tuple[int, str]] = deque(maxlen=LOG_LINES_KEPT)

    @llama_cpp.llama_log_callback  # type: ignore[untyped-decorator]
    def on_log(level: int, text: bytes, _user_data: Any) -> None:
        log.append((level, text.decode("utf-8", errors="replace")))

    llama_cpp.llama_log_set(on_log, ctypes.c_void_p(0))
    system_info = llama_cpp.llama_print_system_info().decode("utf-8", errors="replace").strip()
    features = build_features(system_info)
    base = {
        "llama_cpp_python_version": llama_cpp.__version__,
        "system_info": system_info,
        "build_features": features,
        "import_ms": round((time.perf_counter() - started) * 1000, 2),
    }
    missing = missing_flags(features, set(request.get("host_flags") or []))
    if missing:
        respond(base | {"status": "incompatible", "missing_features": missing}, out)
        return 0
    if not request.get("load"):
        respond(base | {"status": "probed"}, out)
        return 0

    logits_spec = request.get("logits")
    n_ctx = request["n_ctx"]
    if logits_spec:
        n_ctx = max(n_ctx, int(logits_spec["n_tokens"]))
    load_started = time.perf_counter()
    try:
        llm = llama_cpp.Llama(
            model_path=request["model_path"],
            n_ctx=n_ctx,
            n_threads=request["n_threads"],
            n_gpu_layers=0,
            seed=request["seed"],
            logits_all=bool(logits_spec),
            verbose=False,
        )
    except (ValueError, RuntimeError) as exc:
        errors = log_errors(log)
        respond(
            base
            | {
                "status": "load_error",
                "message": str(exc),
                "log_errors": errors[-20:],
                "log_tail": [text.rstrip() for _, text in list(log)[-20:]],
                "peak_rss_bytes": peak_rss_bytes(),
            },
            out,
        )
        return 0
    load_ms = (time.perf_counter() - load_started) * 1000
    has_template = bool(llm.metadata.get("tokenizer.chat_template"))
    items = request.get("prompts") or []
    from jinja2.exceptions import SecurityError

    try:
        if request.get("batched", True) and len(items) > 1:
            generations = generate_batched(llm, llama_cpp, np, items, request, has_template)
        else:
            generations = [
                _generate(llm, llama_cpp, np, item, request, has_template) for item in items
            ]
    except SecurityError as exc:
        # llama-cpp-python renders the chat template in jinja2's sandbox, which refused it:
        # the template reached for what a template must not — not a crash of the runtime.
        respond(base | {"status": "unsafe_template", "message": str(exc)[:500]}, out)
        sys.stderr.flush()
        os._exit(0)
    extra = {"logits": _logits(llm, np, logits_spec)} if logits_spec else {}
    traffic_spec = request.get("traffic")
    if traffic_spec:
        wanted = set(traffic_spec.get("cases") or [])
        asked = [item for item in items if not wanted or item.get("id") in wanted]
        extra["traffic"] = latency_traffic(
            llm, llama_cpp, np, asked, request, has_template, traffic_spec
        )
    # What the generations used, read before a probe frees their model and context.
    measured = {"peak_rss_bytes": peak_rss_bytes(), "mapped_libraries": mapped_libraries()}
    probe_spec = request.get("probe")
    if probe_spec:
        llm.close()
        del llm
        extra["probe"] = served_context_probe(llama_cpp, request, probe_spec, log)
    respond(
        base
        | {
            "status": "ok",
            "load_ms": round(load_ms, 2),
            "has_chat_template": has_template,
            "n_ctx": n_ctx,
            "n_threads": request["n_threads"],
            "generations": generations,
        }
        | measured
        | extra,
        out,
    )
    # The answer is out. Tearing llama.cpp down at interpreter exit can crash (a context freed
    # while the garbage collector clears the sampler callbacks): leave without it.
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
