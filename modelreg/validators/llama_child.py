"""Child process for the GGUF checks: probe the llama.cpp build, then (if asked and the host can
run it) load the model once and run every prompt through it greedily. Run as
``python -m modelreg.validators.llama_child``.

Request (stdin, JSON): model_path, prompts [{id, prompt, chat, max_tokens, expect}], n_ctx,
n_threads, max_tokens (default per prompt), seed, host_flags, load; optionally
``logits: {text, n_tokens, path, token_ids}`` to write the next-token logits of a fixed text
(see ``agreement``), and ``probe: {n_ctx, tokens, type_k, type_v, deadline_s}`` to measure a
served context after the generations (see ``_probe``).
Response (stdout, one JSON line): status is one of ``no_runtime``, ``incompatible``,
``probed``, ``load_error``, ``ok``, with versions, compiled system info, timings and the child's
peak RSS. Each generation carries its output, ``finish_reason`` (``stop`` / ``length``),
``stopped_by_eos`` and the end token, token counts, ``ttft_ms``, prompt and decode timings.
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

from modelreg.validators.child import reserve_stdout, respond
from modelreg.validators.cpu_features import build_features, missing_flags
from modelreg.validators.resources import mapped_libraries, peak_rss_bytes

LOG_LINES_KEPT = 400
CHILD_ARGV = (sys.executable, "-m", "modelreg.validators.llama_child")
# Tokens the probe evaluates per llama_decode call: llama-cpp-python's (and llama-server's
# micro-batch) default.
PROBE_BATCH = 512
# The probe's first batch is small: its time predicts whether the next fits the deadline.
PROBE_FIRST_BATCH = 32
# A fixed text whose tokens, repeated, fill the probe's context: ordinary tokens of the
# vocabulary, the same on every run.
PROBE_TEXT = (
    "The lighthouse keeper climbed the stairs at dusk, counted the steps, trimmed the wick "
    "and wrote the weather in the log: wind from the west, a long swell, rain before midnight. "
)
# ggml_type values llama-cpp-python does not export (ggml.h's enum ggml_type).
_GGML_TYPES_NOT_EXPORTED = {"bf16": 30}
# KV types llama.cpp stores unquantized; a quantized V cache needs flash attention.
_PLAIN_KV_TYPES = ("f32", "f16", "bf16")


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
    chat = item.get("chat")
    use_chat = has_template if chat is None else bool(chat)
    max_tokens = int(item.get("max_tokens") or request["max_tokens"])
    watch = _GreedyWatch(np)
    greedy = {
        "max_tokens": max_tokens,
        "temperature": 0.0,
        "top_k": 1,
        "repeat_penalty": 1.0,
        "seed": request["seed"],
        "logits_processor": llama_cpp.LogitsProcessorList([watch]),
    }
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
    return {
        "id": item.get("id"),
        "prompt": item["prompt"],
        "expect": item.get("expect"),
        "mode": "chat" if use_chat else "completion",
        "chat_template": "model" if use_chat and has_template else None,
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


def _log_errors(log: deque[tuple[int, str]]) -> list[str]:
    # ggml log levels: 3 warn, 4 error.
    return [text.strip() for level, text in log if level in (3, 4) and text.strip()]


def _ggml_type(llama_cpp: Any, name: str) -> int:
    value = getattr(llama_cpp, f"GGML_TYPE_{name.upper()}", None)
    if value is None:
        value = _GGML_TYPES_NOT_EXPORTED.get(name.lower())
    if value is None:
        raise ValueError(f"KV cache type {name!r} is not a ggml type this llama.cpp knows")
    return int(value)


def _reset_peak_rss() -> bool:
    """Set VmHWM back to the current RSS (Linux: 5 to /proc/self/clear_refs), so that the
    peak read next is that of what ran since."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        return False
    return True


def _probe(
    llama_cpp: Any, request: dict[str, Any], spec: dict[str, Any], log: deque[tuple[int, str]]
) -> dict[str, Any]:
    """Resources at a served context: a fresh context of ``n_ctx`` cells with the served KV
    cache types, filled by one synthetic prompt of ``tokens`` tokens (the last evaluated on its
    own, as one decode step at the full context), within ``deadline_s`` seconds from the start
    (model load included). A batch whose predicted time would pass the deadline is not started:
    the probe stops with ``status: timeout`` and how far it got. Never raises."""
    started = time.perf_counter()
    deadline = started + float(spec["deadline_s"])
    n_ctx = int(spec["n_ctx"])
    wanted = min(int(spec.get("tokens") or n_ctx), n_ctx)
    kv_k, kv_v = str(spec.get("type_k") or "f16"), str(spec.get("type_v") or "f16")
    flash_attn = kv_v.lower() not in _PLAIN_KV_TYPES
    result: dict[str, Any] = {
        "n_ctx": n_ctx,
        "kv_dtype_k": kv_k,
        "kv_dtype_v": kv_v,
        "flash_attn": flash_attn,
        "n_batch": PROBE_BATCH,
        "deadline_s": spec["deadline_s"],
        "tokens_requested": wanted,
        "tokens_evaluated": 0,
        "peak_reset": _reset_peak_rss(),
    }

    def done(status: str, **fields: Any) -> dict[str, Any]:
        wall_ms = round((time.perf_counter() - started) * 1000, 2)
        measured = {"status": status, "wall_ms": wall_ms, "peak_rss_bytes": peak_rss_bytes()}
        return result | fields | measured

    log.clear()  # what llama.cpp says from here on is about the probe
    try:
        llm = llama_cpp.Llama(
            model_path=request["model_path"],
            n_ctx=n_ctx,
            n_batch=PROBE_BATCH,
            n_threads=request["n_threads"],
            n_gpu_layers=0,
            seed=request["seed"],
            type_k=_ggml_type(llama_cpp, kv_k),
            type_v=_ggml_type(llama_cpp, kv_v),
            flash_attn=flash_attn,
            verbose=False,
        )
        result["setup_ms"] = round((time.perf_counter() - started) * 1000, 2)
        text = llm.tokenize(PROBE_TEXT.encode("utf-8"), add_bos=False, special=False)
        if not text:
            raise ValueError("the vocabulary gives no tokens for the probe's text")
        tokens = list(llm.tokenize(b"", add_bos=True, special=False))[:1]
        while len(tokens) < wanted:
            tokens.extend(text[: wanted - len(tokens)])
        prompt = tokens[:-1]
        prompt_s = 0.0
        per_token_s = 0.0
        position = 0
        while position < len(prompt):
            size = PROBE_FIRST_BATCH if position == 0 else PROBE_BATCH
            batch = prompt[position : position + size]
            if time.perf_counter() + per_token_s * len(batch) > deadline:
                return done("timeout", **_prompt_figures(position, prompt_s))
            batch_started = time.perf_counter()
            llm.eval(batch)
            elapsed = time.perf_counter() - batch_started
            prompt_s += elapsed
            per_token_s = elapsed / len(batch)
            position += len(batch)
            result["tokens_evaluated"] = position
        figures = _prompt_figures(position, prompt_s)
        if time.perf_counter() + per_token_s > deadline:
            return done("timeout", **figures)
        step_started = time.perf_counter()
        llm.eval(tokens[-1:])
        figures["decode_ms"] = round((time.perf_counter() - step_started) * 1000, 2)
        result["tokens_evaluated"] = position + 1
        return done("ok", **figures)
    except Exception as exc:  # the generations are answered whatever the probe meets
        return done(
            "error",
            message=f"{type(exc).__name__}: {exc}"[:500],
            log_errors=_log_errors(log)[-20:],
        )


def _prompt_figures(tokens: int, seconds: float) -> dict[str, Any]:
    return {
        "prompt_tokens": tokens,
        "prompt_ms": round(seconds * 1000, 2),
        "prompt_tokens_per_s": round(tokens / seconds, 2) if tokens and seconds > 0 else None,
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

    @llama_cpp.llama_log_callback
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
        errors = _log_errors(log)
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
    generations = [
        _generate(llm, llama_cpp, np, item, request, has_template)
        for item in request.get("prompts") or []
    ]
    extra = {"logits": _logits(llm, np, logits_spec)} if logits_spec else {}
    # What the generations used, read before a probe frees their model and context.
    measured = {"peak_rss_bytes": peak_rss_bytes(), "mapped_libraries": mapped_libraries()}
    probe_spec = request.get("probe")
    if probe_spec:
        llm.close()
        del llm
        extra["probe"] = _probe(llama_cpp, request, probe_spec, log)
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
