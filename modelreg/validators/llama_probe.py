"""The served-context probe of the llama_child: what llama.cpp needs at the context a target
serves — a fresh context with the served KV cache types, filled by one synthetic prompt within
a deadline; its peak RSS and prompt tokens/s are what host-compat judges the target's memory
and speed by. Also what llama.cpp logged as warnings and errors (``log_errors``).
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any

from modelreg.validators.resources import peak_rss_bytes

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


def log_errors(log: deque[tuple[int, str]]) -> list[str]:
    """The warnings and errors of llama.cpp's ``log`` (ggml log levels: 3 warn, 4 error)."""
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


def served_context_probe(
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
            log_errors=log_errors(log)[-20:],
        )


def _prompt_figures(tokens: int, seconds: float) -> dict[str, Any]:
    return {
        "prompt_tokens": tokens,
        "prompt_ms": round(seconds * 1000, 2),
        "prompt_tokens_per_s": round(tokens / seconds, 2) if tokens and seconds > 0 else None,
    }
