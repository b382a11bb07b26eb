"""Child process for ``transformers-cpu-smoke``: load a checkpoint with transformers on CPU and
generate greedily. Run as ``python -m modelreg.validators.transformers_child``.

Request (stdin, JSON): model_dir, prompts [{prompt, expect, chat}], max_tokens, threads, dtype.
Response (stdout, one JSON line): status ``no_runtime``, ``load_error`` or ``ok``, with
transformers / torch versions, dtype, load and generation milliseconds, outputs.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from typing import Any

from modelreg.validators.child import reserve_stdout, respond

CHILD_ARGV = (sys.executable, "-m", "modelreg.validators.transformers_child")


def _generate(
    model: Any,
    tokenizer: Any,
    torch: Any,
    item: dict[str, Any],
    max_tokens: int,
    has_template: bool,
) -> dict[str, Any]:
    chat = item.get("chat")
    use_chat = has_template if chat is None else bool(chat)
    if use_chat:
        inputs = tokenizer.apply_chat_template(
            [{"role": "user", "content": item["prompt"]}],
            add_generation_prompt=True,
            return_tensors="pt",
            return_dict=True,
        )
    else:
        inputs = tokenizer(item["prompt"], return_tensors="pt")
    prompt_tokens = int(inputs["input_ids"].shape[1])
    started = time.perf_counter()
    with torch.no_grad():
        output = model.generate(
            **inputs,
            max_new_tokens=max_tokens,
            do_sample=False,
            num_beams=1,
            pad_token_id=tokenizer.pad_token_id or tokenizer.eos_token_id,
        )
    generation_ms = (time.perf_counter() - started) * 1000
    new_tokens = output[0][prompt_tokens:]
    return {
        "prompt": item["prompt"],
        "expect": item.get("expect"),
        "mode": "chat" if use_chat else "completion",
        "output": tokenizer.decode(new_tokens, skip_special_tokens=True),
        "prompt_tokens": prompt_tokens,
        "completion_tokens": int(new_tokens.shape[0]),
        "generation_ms": round(generation_ms, 2),
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
        tokenizer = AutoTokenizer.from_pretrained(request["model_dir"], local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(
            request["model_dir"], dtype=dtype, local_files_only=True
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
        _generate(model, tokenizer, torch, item, request["max_tokens"], has_template)
        for item in request["prompts"]
    ]
    respond(
        base
        | {
            "status": "ok",
            "dtype": str(model.dtype).removeprefix("torch."),
            "load_ms": round(load_ms, 2),
            "has_chat_template": has_template,
            "threads": request["threads"],
            "generations": generations,
        },
        out,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
