"""Child process for ``transformers-cpu-smoke``: load a checkpoint with transformers on CPU and
generate greedily. Run as ``python -m modelreg.validators.transformers_child``.

Request (stdin, JSON): model_dir, prompts [{id, prompt, chat, max_tokens, expect}], max_tokens
(default per prompt), threads, dtype; optionally ``logits: {text, n_tokens, path, token_ids}``
(see ``agreement``).
Response (stdout, one JSON line): status ``no_runtime``, ``load_error`` or ``ok``, with
transformers / torch versions, dtype, load milliseconds, the child's peak RSS, and per
generation the output, ``finish_reason`` / ``stopped_by_eos`` / end token, token counts,
``ttft_ms``, prompt and decode timings — the same keys as the llama.cpp child, with
``batched`` and ``batch_size``.

A suite of more than one case runs as one ``generate`` call unless the request says
``batched: false`` or the model runs in a lower precision than float32 (in bfloat16 padding
changed greedy outputs): prompts left-padded with an attention mask, greedy, each sequence cut
at its own budget or end-of-sequence token. ``ttft_ms`` is then the shared prefill of every
prompt and ``decode_ms`` the wall time of the steps shared until that sequence ended.
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

    use_chat = _use_chat(item, has_template)
    max_tokens = int(item.get("max_tokens") or default_max_tokens)
    inputs = _case_inputs(tokenizer, item, use_chat, has_template)
    prompt_tokens = int(inputs["input_ids"].shape[1])
    streamer = FirstToken()
    started = time.perf_counter()
    with torch.no_grad():
        output = model.generate(
            **inputs,
            max_new_tokens=max_tokens,
            do_sample=False,
            num_beams=1,
            pad_token_id=_pad_token_id(tokenizer),
            streamer=streamer,
        )
    generation_ms = (time.perf_counter() - started) * 1000
    new_tokens = output[0][prompt_tokens:]
    ttft_ms = (streamer.first_at - started) * 1000 if streamer.first_at else None
    decode_ms = generation_ms - ttft_ms if ttft_ms is not None else None
    return _generation(
        tokenizer,
        item,
        use_chat,
        has_template,
        new_tokens,
        _eos_ids(model),
        prompt_tokens,
        max_tokens,
        ttft_ms,
        decode_ms,
        generation_ms,
    ) | {"batched": False, "batch_size": 1}


def _case_inputs(tokenizer: Any, item: dict[str, Any], use_chat: bool, has_template: bool) -> Any:
    # A chat turn asked of a model without a chat template gets the bare prompt (and is still
    # judged as a turn that must end).
    if use_chat and has_template:
        return tokenizer.apply_chat_template(
            [{"role": "user", "content": item["prompt"]}],
            add_generation_prompt=True,
            return_tensors="pt",
            return_dict=True,
        )
    return tokenizer(item["prompt"], return_tensors="pt")


def _generate_batched(
    model: Any,
    tokenizer: Any,
    torch: Any,
    items: list[dict[str, Any]],
    default_max_tokens: int,
    has_template: bool,
) -> list[dict[str, Any]]:
    """Every case in one ``generate`` call: the prompts (built as in ``_generate``) left-padded
    to the longest, with an attention mask, decoded greedily for the largest budget; each
    sequence is then cut at its own budget or its first end-of-sequence token, where
    ``_generate`` would have stopped. TTFT is the batch's shared prefill; a sequence's decode
    time runs from the first token to the step that ended it (steps shared by the batch)."""
    from transformers.generation.streamers import BaseStreamer

    class StepTimes(BaseStreamer):
        """The time of every ``put`` (the first gets the prompt, each next a step's tokens)."""

        def __init__(self) -> None:
            self.times: list[float] = []

        def put(self, value: Any) -> None:
            self.times.append(time.perf_counter())

        def end(self) -> None:
            pass

    cases = []
    for item in items:
        use_chat = _use_chat(item, has_template)
        ids = _case_inputs(tokenizer, item, use_chat, has_template)["input_ids"][0].tolist()
        cases.append((item, use_chat, ids, int(item.get("max_tokens") or default_max_tokens)))
    pad = _pad_token_id(tokenizer)
    width = max(len(ids) for _, _, ids, _ in cases)
    input_ids = torch.tensor([[pad] * (width - len(ids)) + ids for _, _, ids, _ in cases])
    attention_mask = torch.tensor(
        [[0] * (width - len(ids)) + [1] * len(ids) for _, _, ids, _ in cases]
    )
    budget = max(max_tokens for *_, max_tokens in cases)
    steps = StepTimes()
    started = time.perf_counter()
    with torch.no_grad():
        output = model.generate(
            input_ids=input_ids,
            attention_mask=attention_mask,
            max_new_tokens=budget,
            do_sample=False,
            num_beams=1,
            pad_token_id=pad,
            streamer=steps,
        )
    eos_ids = _eos_ids(model)
    first_at = steps.times[1] if len(steps.times) > 1 else None
    generations = []
    for row, (item, use_chat, ids, max_tokens) in enumerate(cases):
        new = output[row][width:][:max_tokens].tolist()
        ends = [i for i, token in enumerate(new) if token in eos_ids]
        if ends:
            new = new[: ends[0] + 1]
        n_new = len(new)
        # put #1 is the prompt; put #k+1 brings the k-th new token of every live sequence.
        finished_at = steps.times[min(n_new, len(steps.times) - 1)] if n_new else started
        ttft_ms = (first_at - started) * 1000 if first_at else None
        decode_ms = (finished_at - first_at) * 1000 if first_at and n_new else None
        generations.append(
            _generation(
                tokenizer,
                item,
                use_chat,
                has_template,
                torch.tensor(new, dtype=torch.long),
                eos_ids,
                len(ids),
                max_tokens,
                ttft_ms,
                decode_ms,
                (finished_at - started) * 1000,
            )
            | {"batched": True, "batch_size": len(cases), "batch_padded_width": width}
        )
    return generations


def _use_chat(item: dict[str, Any], has_template: bool) -> bool:
    chat = item.get("chat")
    return has_template if chat is None else bool(chat)


def _pad_token_id(tokenizer: Any) -> int:
    return int(tokenizer.pad_token_id or tokenizer.eos_token_id)


def _eos_ids(model: Any) -> set[int]:
    eos = model.generation_config.eos_token_id
    return set(eos if isinstance(eos, list) else [] if eos is None else [eos])


def _generation(
    tokenizer: Any,
    item: dict[str, Any],
    use_chat: bool,
    has_template: bool,
    new_tokens: Any,
    eos_ids: set[int],
    prompt_tokens: int,
    max_tokens: int,
    ttft_ms: float | None,
    decode_ms: float | None,
    generation_ms: float,
) -> dict[str, Any]:
    n_new = int(new_tokens.shape[0])
    last = int(new_tokens[-1]) if n_new else None
    stopped_by_eos = last is not None and last in eos_ids
    finish_reason = "stop" if stopped_by_eos else "length" if n_new >= max_tokens else None
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
        model.eval()  # type: ignore[no-untyped-call]
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
    items = request.get("prompts") or []
    default_max_tokens = request.get("max_tokens", 16)
    # Padded batches give float32's greedy outputs bit for bit; in bfloat16 they changed 3 of
    # the default suite's 15 (SmolLM2): a lower precision runs one case at a time.
    batched = request.get("batched", True) and len(items) > 1 and model.dtype == torch.float32
    if batched:
        generations = _generate_batched(
            model, tokenizer, torch, items, default_max_tokens, has_template
        )
    else:
        generations = [
            _generate(model, tokenizer, torch, item, default_max_tokens, has_template)
            for item in items
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
