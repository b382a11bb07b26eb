"""The host side of a slim Neuron deploy: embedding lookup × scale → traced decoder → greedy.

Everything here but device placement is the same on an inf2 host (where the traced decoder
holds NEFFs) and on a CPU (where it is a plain TorchScript trace), so the tests run it for real
on CPU. The decoder takes ``inputs_embeds`` padded to a fixed bucket and the index of the last
real position, and returns that position's logits: a causal model's logits at a position do not
depend on what follows it, so right-padding to the compiled bucket is exact.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any


def generate(
    bundle: Path,
    model_file: str,
    embedding_file: str,
    scale: float,
    prompts: list[dict[str, Any]],
    max_tokens: int,
    bucket: int,
) -> dict[str, Any]:
    import torch
    from transformers import AutoTokenizer

    from modelreg.safety.pickles import require_clean

    started = time.perf_counter()
    # Unpickling runs what the pickle names: nothing is loaded that was not scanned clean here,
    # whatever the record's holds say (a verify may run on a held record).
    require_clean([bundle / model_file, bundle / embedding_file])
    decoder = torch.jit.load(str(bundle / model_file), map_location="cpu")  # type: ignore[no-untyped-call]
    decoder.eval()
    table = torch.load(bundle / embedding_file, map_location="cpu", weights_only=True)
    tokenizer = AutoTokenizer.from_pretrained(str(bundle), local_files_only=True)
    load_ms = (time.perf_counter() - started) * 1000
    has_template = bool(getattr(tokenizer, "chat_template", None))
    generations = []
    for item in prompts:
        # As the other runtime children: a chat turn goes through the model's chat template
        # (without one, the bare prompt, still judged as a turn that must end).
        chat = item.get("chat")
        use_chat = has_template if chat is None else bool(chat)
        if use_chat and has_template:
            text = tokenizer.apply_chat_template(
                [{"role": "user", "content": item["prompt"]}],
                add_generation_prompt=True,
                tokenize=False,
            )
            ids = tokenizer(text, add_special_tokens=False)["input_ids"]  # the template's own
        else:
            ids = tokenizer(item["prompt"])["input_ids"]
        prompt_tokens = len(ids)
        new: list[int] = []
        stopped_by_eos = False
        item_max_tokens = int(item.get("max_tokens") or max_tokens)
        gen_started = time.perf_counter()
        prefill_ms = None
        for _ in range(item_max_tokens):
            if len(ids) > bucket:
                break
            embeds = torch.zeros(1, bucket, table.shape[1], dtype=table.dtype)
            embeds[0, : len(ids)] = table[torch.tensor(ids)] * scale
            step_started = time.perf_counter()
            with torch.no_grad():
                logits = decoder(embeds, torch.tensor([len(ids) - 1]))
            if prefill_ms is None:
                prefill_ms = (time.perf_counter() - step_started) * 1000
            token = int(logits.argmax())
            if token == tokenizer.eos_token_id:
                stopped_by_eos = True
                break
            ids.append(token)
            new.append(token)
        generations.append(
            {
                "id": item.get("id"),
                "prompt": item["prompt"],
                "expect": item.get("expect"),
                "mode": "chat" if use_chat else "completion",
                "chat_template": "model" if use_chat and has_template else None,
                "output": tokenizer.decode(new, skip_special_tokens=True),
                "prompt_tokens": prompt_tokens,
                "completion_tokens": len(new),
                "max_tokens": item_max_tokens,
                # The bucket can run out before the budget: that is not an end of turn either.
                "finish_reason": "stop" if stopped_by_eos else "length",
                "stopped_by_eos": stopped_by_eos,
                "prefill_ms": round(prefill_ms or 0.0, 2),
                "generation_ms": round((time.perf_counter() - gen_started) * 1000, 2),
            }
        )
    return {
        "load_ms": round(load_ms, 2),
        "scale": scale,
        "bucket": bucket,
        "generations": generations,
    }
