"""Child process for ``transformers-cpu-smoke``: load a checkpoint with transformers on CPU and
generate greedily. Run as ``python -m modelreg.validators.transformers_child``.

Request (stdin, JSON): model_dir, prompts [{id, prompt, chat, max_tokens, expect}], max_tokens
(default per prompt), threads, dtype; optionally ``logits: {text, n_tokens, path, token_ids}``
(see ``agreement``).
Response (stdout, one JSON line): status ``no_runtime``, ``load_error`` or ``ok``, with
transformers / torch versions, dtype, load milliseconds, the child's peak RSS, and per
generation the output, ``finish_reason`` / ``stopped_by_eos`` / end token, token counts,
``ttft_ms``, prompt and decode timings — the same keys as the llama.cpp child.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from typing import Any

from modelreg.validators.child import reserve_stdout, respond
from modelreg.validators.resources import mapped_libraries, peak_rss_bytes

CHILD_ARGV = (sys.executable, "-m", "modelreg.validators.transformers_child")


def _generate(
    model: Any,
    tokenizer: Any,
    torch: Any,
    item: dict[str, Any],
    default_max_tokens: int,
    has_template: bool,
) -> dict[str, Any]:
    from transformers.generation.streamers import BaseStreamer

    class FirstToken(BaseStreamer):
        """Notes when the first new token arrives (``put`` first gets the prompt)."""

        def __init__(self) -> None:
            self.calls = 0
            self.first_at: float | None = None

        def put(self, value: Any) -> None:
            self.calls += 1
            if self.calls == 2:
                self.first_at = time.perf_counter()

        def end(self) -> None:
            pass

    chat = item.get("chat")
    use_chat = has_template if chat is None else bool(chat)
    max_tokens = int(item.get("max_tokens") or default_max_tokens)
    # A chat turn asked of a model without a chat template gets the bare prompt (and is still
    # judged as a turn that must end).
    if use_chat and has_template:
        inputs = tokenizer.apply_chat_template(
            [{"role": "user", "content": item["prompt"]}],
            add_generation_prompt=True,
            return_tensors="pt",
            return_dict=True,
        )
    else:
        inputs = tokenizer(item["prompt"], return_tensors="pt")
    prompt_tokens = int(inputs["input_ids"].shape[1])
    streamer = FirstToken()
    started = time.perf_counter()
    with torch.no_grad():
        output = model.generate(
            **inputs,
            max_new_tokens=max_tokens,
            do_sample=False,
            num_beams=1,
            pad_token_id=tokenizer.pad_token_id or tokenizer.eos_token_id,
            streamer=streamer,
        )
    generation_ms = (time.perf_counter() - started) * 1000
    new_tokens = output[0][prompt_tokens:]
    n_new = int(new_tokens.shape[0])
    eos = model.generation_config.eos_token_id
    eos_ids = set(eos if isinstance(eos, list) else [] if eos is None else [eos])
    last = int(new_tokens[-1]) if n_new else None
    stopped_by_eos = last is not None and last in eos_ids
    finish_reason = "stop" if stopped_by_eos else "length" if n_new >= max_tokens else None
    ttft_ms = (streamer.first_at - started) * 1000 if streamer.first_at else None
    decode_ms = generation_ms - ttft_ms if ttft_ms is not None else None
    return {
        "id": item.get("id"),
        "prompt": item["prompt"],
        "expect": item.get("expect"),
        "mode": "chat" if use_chat else "completion",
        "chat_template": "model" if use_chat and has_template else None,
        "output": tokenizer.decode(new_tokens, skip_special_tokens=True),
        "finish_reason": finish_reason,
        "stopped_by_eos": stopped_by_eos,
        "end_token": tokenizer.convert_ids_to_tokens(last) if stopped_by_eos else None,
        "max_tokens": max_tokens,
        "prompt_tokens": prompt_tokens,
        "completion_tokens": n_new,
        # The first token comes out of the prefill: prompt time is time to first token.
        "prompt_eval_tokens": prompt_tokens,
        "prompt_ms": round(ttft_ms, 2) if ttft_ms is not None else None,
        "decode_tokens": max(n_new - 1, 0),
        "decode_ms": round(decode_ms, 2) if decode_ms is not None else None,
        "ttft_ms": round(ttft_ms, 2) if ttft_ms is not None else None,
        "generation_ms": round(generation_ms, 2),
    }


def _logits(model: Any, tokenizer: Any, torch: Any, spec: dict[str, Any]) -> dict[str, Any]:
    """Next-token logits at every position of a fixed text, saved as float32 .npy."""
    import numpy as np

    started = time.perf_counter()
    n_tokens = spec["n_tokens"]
    own = tokenizer(spec["text"], add_special_tokens=False)["input_ids"][:n_tokens]
    ids = list(spec.get("token_ids") or tokenizer(spec["text"])["input_ids"])[:n_tokens]
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].float().numpy()
    np.save(spec["path"], logits.astype(np.float32))
    return {
        "token_ids": ids,
        "text_token_ids": own,
        "vocab": int(logits.shape[1]),
        "path": spec["path"],
        "logits_ms": round((time.perf_counter() - started) * 1000, 2),
    }


def main() -> int:
    out = reserve_stdout()
    started = time.perf_counter()
    try:
        import torch
        import transformers
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as exc:
        respond(
            {"status": "no_runtime", "message": f"transformers/torch not importable: {exc}"}, out
        )
        return 0
    request = json.loads(sys.stdin.read())
    base = {
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "import_ms": round((time.perf_counter() - started) * 1000, 2),
    }
    torch.manual_seed(0)
    torch.set_num_threads(request["threads"])
    load_started = time.perf_counter()
    try:
        dtype = getattr(torch, request["dtype"]) if request.get("dtype") else "auto"
        # Safetensors only, nothing remote: a pickle (.bin) is never loaded, and code beside
        # the weights is never imported (the directory holds only the record's files).
        tokenizer = AutoTokenizer.from_pretrained(
            request["model_dir"], local_files_only=True, trust_remote_code=False
        )
        model = AutoModelForCausalLM.from_pretrained(
            request["model_dir"],
            dtype=dtype,
            local_files_only=True,
            use_safetensors=True,
            trust_remote_code=False,
        )
        model.eval()
    except Exception as exc:  # any loader failure is the finding, reported with its cause
        respond(
            base
            | {
                "status": "load_error",
                "message": f"{type(exc).__name__}: {exc}",
                "traceback_tail": traceback.format_exc()[-2000:],
            },
            out,
        )
        return 0
    load_ms = (time.perf_counter() - load_started) * 1000
    has_template = bool(getattr(tokenizer, "chat_template", None))
    generations = [
        _generate(model, tokenizer, torch, item, request.get("max_tokens", 16), has_template)
        for item in request.get("prompts") or []
    ]
    logits_spec = request.get("logits")
    extra = {"logits": _logits(model, tokenizer, torch, logits_spec)} if logits_spec else {}
    respond(
        base
        | {
            "status": "ok",
            "dtype": str(model.dtype).removeprefix("torch."),
            "load_ms": round(load_ms, 2),
            "has_chat_template": has_template,
            "threads": request["threads"],
            "generations": generations,
            "peak_rss_bytes": peak_rss_bytes(),
            "mapped_libraries": mapped_libraries(),
        }
        | extra,
        out,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
