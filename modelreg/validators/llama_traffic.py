"""A suite's latency plan measured in the llama_child: the suite's cases sent by a closed loop
of clients to one llama.cpp context that batches continuously, as a server's slots would.

Each request is a sequence of ``llama_batched`` (the same prompt, the same greedy stopping);
what is measured is each request's time to first token from when its client sent it, its
decode rate inside the batch, and the phase's wall time.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any

from modelreg.validators.llama_batched import (
    BATCH_CELL_PAD,
    CaseSequence,
    prompt_sequence,
    take_token,
)

TRAFFIC_BATCHING = (
    "continuous batching in one llama.cpp context of {c} slot(s), one KV stream each: a closed "
    "loop of {c} client(s) — a request enters a slot as soon as one frees, its prompt "
    "prefilled in the same llama_decode as the other slots' next tokens; no prompt cache "
    "between requests; TTFT from the request's entry to its first token"
)


def _fresh(template: CaseSequence) -> CaseSequence:
    return CaseSequence(
        item=template.item,
        use_chat=template.use_chat,
        has_template=template.has_template,
        prompt_tokens=list(template.prompt_tokens),
        stop_sequences=template.stop_sequences,
        max_tokens=template.max_tokens,
    )


def _closed_loop(
    llm: Any, llama_cpp: Any, np: Any, queue: list[CaseSequence], slots: int
) -> dict[str, Any]:
    """Serve ``queue`` as ``slots`` clients would send it: each slot takes the next request
    the moment it frees; every ``llama_decode`` carries the new requests' prompts and the
    running ones' next tokens. Returns the phase's wall time and the most in flight."""
    n_vocab = llama_cpp.llama_vocab_n_tokens(llm._model.vocab)
    params = llama_cpp.llama_context_params.from_buffer_copy(llm.context_params)
    per_slot = -(-max(s.cells for s in queue) // BATCH_CELL_PAD) * BATCH_CELL_PAD
    longest = sorted((len(s.prompt_tokens) for s in queue), reverse=True)[:slots]
    params.n_ctx = per_slot * slots
    params.n_batch = sum(longest) + slots
    params.n_ubatch = params.n_batch
    params.n_seq_max = slots
    params.kv_unified = False
    ctx = llama_cpp.llama_init_from_model(llm.model, params)
    if not ctx:
        raise RuntimeError(f"llama.cpp could not create a context for {slots} slots")
    batch = llama_cpp.llama_batch_init(params.n_batch, 0, 1)
    try:
        mem = llama_cpp.llama_get_memory(ctx)
        pending = deque(queue)
        running: dict[int, CaseSequence] = {}
        most = 0
        started = time.perf_counter()
        while pending or running:
            entries: list[tuple[int, int, int, bool]] = []
            rows: dict[int, int] = {}
            now = time.perf_counter()
            for slot in range(slots):
                seq = running.get(slot)
                if seq is None and pending:
                    seq = running[slot] = pending.popleft()
                    seq.sent_at = now
                    llama_cpp.llama_memory_seq_rm(mem, slot, -1, -1)
                    last = len(seq.prompt_tokens) - 1
                    for position, token in enumerate(seq.prompt_tokens):
                        entries.append((token, position, slot, position == last))
                elif seq is not None:
                    entries.append((seq.completion[-1], seq.next_position - 1, slot, True))
                else:
                    continue
                rows[slot] = len(entries) - 1
            most = max(most, len(running))
            for i, (token, position, seq_id, wants_logits) in enumerate(entries):
                batch.token[i] = token
                batch.pos[i] = position
                batch.n_seq_id[i] = 1
                batch.seq_id[i][0] = seq_id
                batch.logits[i] = wants_logits
            batch.n_tokens = len(entries)
            step_started = time.perf_counter()
            code = llama_cpp.llama_decode(ctx, batch)
            if code != 0:
                raise RuntimeError(f"llama_decode returned {code}")
            for slot, row in rows.items():
                seq = running[slot]
                logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, row), (n_vocab,))
                now = time.perf_counter()
                if seq.first_at is None:
                    seq.first_at = now
                else:
                    seq.decode_steps += 1
                    seq.decode_s += now - step_started
                take_token(llm, llama_cpp, seq, int(np.argmax(logits)), now)
                if seq.finish_reason is not None:
                    del running[slot]
                    llama_cpp.llama_memory_seq_rm(mem, slot, -1, -1)
        return {"wall_ms": round((time.perf_counter() - started) * 1000, 2), "most": most}
    finally:
        llama_cpp.llama_batch_free(batch)
        llama_cpp.llama_free(ctx)


def latency_traffic(
    llm: Any,
    llama_cpp: Any,
    np: Any,
    items: list[dict[str, Any]],
    request: dict[str, Any],
    has_template: bool,
    spec: dict[str, Any],
) -> dict[str, Any]:
    """A suite's latency plan: ``warmup`` requests (not measured), then each of ``items``
    ``repeat`` times, ``concurrency`` in flight (``_closed_loop``). Never raises."""
    slots = int(spec["concurrency"])
    result: dict[str, Any] = {"batching": TRAFFIC_BATCHING.format(c=slots)}
    try:
        templates = [prompt_sequence(llm, item, request, has_template) for item in items]
        if not templates:
            return result | {"status": "not_run", "message": "no case to ask"}
        warm = [_fresh(templates[i % len(templates)]) for i in range(int(spec["warmup"]))]
        if warm:
            _closed_loop(llm, llama_cpp, np, warm, slots)
        measured = [_fresh(t) for _ in range(int(spec["repeat"])) for t in templates]
        phase = _closed_loop(llm, llama_cpp, np, measured, slots)
    except Exception as exc:  # the judged generations are answered whatever traffic meets
        return result | {"status": "error", "message": f"{type(exc).__name__}: {exc}"[:500]}
    requests = []
    for seq in measured:
        assert seq.sent_at is not None and seq.first_at is not None
        requests.append(
            {
                "id": seq.item.get("id"),
                "prompt_tokens": len(seq.prompt_tokens),
                "completion_tokens": len(seq.completion),
                "finish_reason": seq.finish_reason,
                "output": seq.text.decode("utf-8", errors="ignore"),
                "ttft_ms": round((seq.first_at - seq.sent_at) * 1000, 2),
                "decode_tokens": seq.decode_steps,
                "decode_ms": round(seq.decode_s * 1000, 2),
            }
        )
    return result | {
        "status": "ok",
        "requests": requests,
        "wall_ms": phase["wall_ms"],
        "max_in_flight": phase["most"],
    }
