"""Child process for the GGUF checks: probe the llama.cpp build, then (if asked and the host can
run it) load the model and generate greedily. Run as ``python -m modelreg.validators.llama_child``.

Request (stdin, JSON): model_path, prompts [{prompt, expect, chat}], n_ctx, n_threads,
max_tokens, seed, host_flags, load.
Response (stdout, one JSON line): status is one of ``no_runtime``, ``incompatible``,
``probed``, ``load_error``, ``ok``, with versions, compiled system info and timings.
"""

from __future__ import annotations

import json
import sys
import time
from collections import deque
from typing import Any

from modelreg.validators.child import reserve_stdout, respond
from modelreg.validators.cpu_features import build_features, missing_flags

LOG_LINES_KEPT = 400
CHILD_ARGV = (sys.executable, "-m", "modelreg.validators.llama_child")


def _generate(
    llm: Any, llama_cpp: Any, item: dict[str, Any], max_tokens: int, seed: int, has_template: bool
) -> dict[str, Any]:
    chat = item.get("chat")
    use_chat = has_template if chat is None else bool(chat)
    llama_cpp.llama_perf_context_reset(llm.ctx)
    started = time.perf_counter()
    if use_chat:
        reply = llm.create_chat_completion(
            messages=[{"role": "user", "content": item["prompt"]}],
            max_tokens=max_tokens,
            temperature=0.0,
            top_k=1,
            seed=seed,
        )
        text = reply["choices"][0]["message"]["content"] or ""
    else:
        reply = llm.create_completion(
            item["prompt"], max_tokens=max_tokens, temperature=0.0, top_k=1, seed=seed
        )
        text = reply["choices"][0]["text"]
    wall_ms = (time.perf_counter() - started) * 1000
    perf = llama_cpp.llama_perf_context(llm.ctx)
    return {
        "prompt": item["prompt"],
        "expect": item.get("expect"),
        "mode": "chat" if use_chat else "completion",
        "output": text,
        "prompt_tokens": reply["usage"]["prompt_tokens"],
        "completion_tokens": reply["usage"]["completion_tokens"],
        "prompt_ms": round(perf.t_p_eval_ms, 2),
        "generation_ms": round(perf.t_eval_ms, 2),
        "wall_ms": round(wall_ms, 2),
    }


def main() -> int:
    out = reserve_stdout()
    started = time.perf_counter()
    # Import before reading the request: the parent may start us early (see RuntimeChild).
    try:
        import ctypes

        import llama_cpp
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

    load_started = time.perf_counter()
    try:
        llm = llama_cpp.Llama(
            model_path=request["model_path"],
            n_ctx=request["n_ctx"],
            n_threads=request["n_threads"],
            n_gpu_layers=0,
            seed=request["seed"],
            verbose=False,
        )
    except (ValueError, RuntimeError) as exc:
        # ggml log levels: 3 warn, 4 error.
        errors = [text.strip() for level, text in log if level in (3, 4) and text.strip()]
        respond(
            base
            | {
                "status": "load_error",
                "message": str(exc),
                "log_errors": errors[-20:],
                "log_tail": [text.rstrip() for _, text in list(log)[-20:]],
            },
            out,
        )
        return 0
    load_ms = (time.perf_counter() - load_started) * 1000
    has_template = bool(llm.metadata.get("tokenizer.chat_template"))
    generations = [
        _generate(llm, llama_cpp, item, request["max_tokens"], request["seed"], has_template)
        for item in request["prompts"]
    ]
    respond(
        base
        | {
            "status": "ok",
            "load_ms": round(load_ms, 2),
            "has_chat_template": has_template,
            "n_ctx": request["n_ctx"],
            "n_threads": request["n_threads"],
            "generations": generations,
        },
        out,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
