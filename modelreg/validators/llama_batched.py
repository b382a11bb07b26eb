"""A suite's cases decoded greedily as parallel sequences of one llama.cpp context (the
llama_child's default for a suite of more than one case), and what a generation reports
whichever way it ran.

Every case is a sequence (its own seq_id and KV stream) of one context beside the model's own.
The prompts are llama-cpp-python's own (taken from ``create_chat_completion`` /
``create_completion``, so the chat template, BOS and special tokens cannot drift); the prefix
every prompt shares is evaluated once and copied, then one prefill batch holds the rest of
every prompt, then each ``llama_decode`` takes the next token of every live sequence; each
sequence stops on its own (end-of-generation token, stop string, its budget) exactly where
``Llama._create_completion`` stops. Greedy is the argmax of the logits. What batching does to
the figures: ``ttft_ms`` (and ``prompt_ms``) is the time from the batch's start to that
sequence's first token, i.e. the shared prefill of every prompt; ``decode_ms`` is the wall time
of the steps the sequence was live for, each step shared by every live sequence, so
``decode_tokens / decode_ms`` is that sequence's rate inside the batch (lower than alone, while
the batch's throughput is higher); ``wall_ms`` is from the batch's start to its end. Whether the
outputs equal the one-at-a-time ones depends on the model's kernels: bit-identical for SmolLM2
Q4_1; for Gemma 3 270M (Q4_K/Q5_0/Q8_0/Q6_K) a sequence's logits move with the other prompts
of its batch and some greedy outputs differ (tests/validators/test_batched.py).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

# A batched suite's contexts: at most this many sequences, and KV cells, per context (the rest
# go to the next context); each sequence's KV stream is rounded up to whole pads.
BATCH_MAX_SEQUENCES = 32
BATCH_MAX_CELLS = 16384
BATCH_CELL_PAD = 256
# ... and at most this much KV cache (an f16 estimate) beside the model's own context.
BATCH_MAX_KV_BYTES = 512 * 1024**2
# A sequence decodes up to 3 tokens past its budget to finish a UTF-8 character.
UTF8_OVERRUN = 3


class _PromptCaptured(Exception):
    """Raised by the stand-in for ``Llama.generate``: llama-cpp-python has built the prompt."""


@dataclass
class CaseSequence:
    """One case of a batched suite: its prompt exactly as llama-cpp-python builds it, and the
    state of its greedy decode."""

    item: dict[str, Any]
    use_chat: bool
    has_template: bool
    prompt_tokens: list[int]
    stop_sequences: list[bytes]
    max_tokens: int
    completion: list[int] = field(default_factory=list)
    text: bytes = b""
    multibyte_fix: int = 0
    finish_reason: str | None = None
    end: int | None = None
    first_at: float | None = None
    finished_at: float | None = None
    decode_steps: int = 0
    decode_s: float = 0.0
    sent_at: float | None = None  # traffic: when its client sent it

    @property
    def next_position(self) -> int:
        return len(self.prompt_tokens) + len(self.completion)

    @property
    def cells(self) -> int:
        return len(self.prompt_tokens) + self.max_tokens + UTF8_OVERRUN


def wants_chat(item: dict[str, Any], has_template: bool) -> bool:
    """Is the case asked as a chat turn (its own ``chat``, else: the model has a template)?"""
    chat = item.get("chat")
    return has_template if chat is None else bool(chat)


def greedy_settings(item: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
    """llama-cpp-python's sampling arguments for a greedy answer to the case."""
    return {
        "max_tokens": int(item.get("max_tokens") or request["max_tokens"]),
        "temperature": 0.0,
        "top_k": 1,
        "repeat_penalty": 1.0,
        "seed": request["seed"],
    }


def prompt_sequence(
    llm: Any, item: dict[str, Any], request: dict[str, Any], has_template: bool
) -> CaseSequence:
    """The case's prompt tokens and stop strings, taken from llama-cpp-python's own
    ``create_chat_completion`` / ``create_completion`` (chat template, BOS and special-token
    handling included) by standing in for ``generate``: the batched prompt cannot drift from
    the sequential one."""
    use_chat = wants_chat(item, has_template)
    greedy = greedy_settings(item, request)
    captured: dict[str, Any] = {}
    create = llm._create_completion

    def create_recording_stop(*args: Any, **kwargs: Any) -> Any:
        captured["stop"] = kwargs.get("stop")
        return create(*args, **kwargs)

    def generate_capturing_prompt(tokens: Any, **_kwargs: Any) -> Any:
        captured["tokens"] = [int(t) for t in tokens]
        raise _PromptCaptured
        yield  # a generator, as Llama.generate is  # noqa: V201

    llm._create_completion = create_recording_stop
    llm.generate = generate_capturing_prompt
    try:
        if use_chat and has_template:
            llm.create_chat_completion(
                messages=[{"role": "user", "content": item["prompt"]}], **greedy
            )
        else:
            llm.create_completion(item["prompt"], **greedy)
    except _PromptCaptured:
        pass
    finally:
        del llm._create_completion, llm.generate
    if "tokens" not in captured:
        raise RuntimeError("llama-cpp-python built no prompt for case " + repr(item.get("id")))
    stop = captured.get("stop")
    stop = stop if isinstance(stop, list) else [stop] if isinstance(stop, str) else []
    prompt = captured["tokens"]
    # Llama._create_completion's own bounds: the prompt must fit, the budget is cut to fit.
    n_ctx = llm.n_ctx()
    if len(prompt) >= n_ctx:
        raise ValueError(f"Requested tokens ({len(prompt)}) exceed context window of {n_ctx}")
    max_tokens = greedy["max_tokens"]
    if max_tokens <= 0:
        max_tokens = n_ctx - len(prompt)
    max_tokens = max_tokens if max_tokens + len(prompt) < n_ctx else n_ctx - len(prompt)
    return CaseSequence(
        item=item,
        use_chat=use_chat,
        has_template=has_template,
        prompt_tokens=prompt,
        stop_sequences=[s.encode("utf-8") for s in stop],
        max_tokens=max_tokens,
    )


def take_token(llm: Any, llama_cpp: Any, seq: CaseSequence, token: int, now: float) -> None:
    """One step of ``Llama._create_completion``'s loop for one sequence: end of generation,
    then UTF-8 completion, stop strings, and the token budget, in its order."""
    seq.end = token
    if llama_cpp.llama_vocab_is_eog(llm._model.vocab, token):
        seq.text = llm.detokenize(seq.completion, prev_tokens=seq.prompt_tokens)
        seq.finish_reason, seq.finished_at = "stop", now
        return
    seq.completion.append(token)
    all_text = llm.detokenize(seq.completion, prev_tokens=seq.prompt_tokens)
    for k, char in enumerate(all_text[-3:]):
        k = 3 - k
        for num, pattern in [(2, 192), (3, 224), (4, 240)]:
            if num > k and pattern & char == pattern:
                seq.multibyte_fix = num - k
    # An incomplete UTF-8 character is neither checked for stop strings nor cut by the
    # budget: llama-cpp-python decodes on until it completes.
    if seq.multibyte_fix > 0:
        seq.multibyte_fix -= 1
        return
    stops = [s for s in seq.stop_sequences if s in all_text]
    if stops:
        seq.text = all_text[: all_text.index(stops[0])]
        seq.finish_reason, seq.finished_at = "stop", now
    elif len(seq.completion) >= seq.max_tokens:
        seq.text = all_text
        seq.finish_reason, seq.finished_at = "length", now


def _batched_context(llm: Any, llama_cpp: Any, group: list[CaseSequence]) -> Any:
    """A context beside the model's own for ``group``: one KV stream per sequence
    (``kv_unified`` off), each as large as the longest prompt plus budget, so a sequence's
    cells sit at the positions they have when it runs alone; micro-batch as large as the
    prefill. Everything else (threads, KV types, attention) is the model's own context's."""
    params = llama_cpp.llama_context_params.from_buffer_copy(llm.context_params)
    per_sequence = -(-max(s.cells for s in group) // BATCH_CELL_PAD) * BATCH_CELL_PAD
    prefill = sum(len(s.prompt_tokens) for s in group)
    params.n_ctx = per_sequence * len(group)
    params.n_batch = max(prefill, len(group))
    params.n_ubatch = params.n_batch
    params.n_seq_max = len(group)
    params.kv_unified = False
    ctx = llama_cpp.llama_init_from_model(llm.model, params)
    if not ctx:
        raise RuntimeError(f"llama.cpp could not create a context for {len(group)} sequences")
    return ctx


def _decode_group(llm: Any, llama_cpp: Any, np: Any, group: list[CaseSequence]) -> dict[str, Any]:
    """Greedy decode of ``group`` in one context: one prefill batch with every prompt (each
    its own seq_id), then one ``llama_decode`` per step with the next token of every live
    sequence. Returns the group's shared figures."""
    n_vocab = llama_cpp.llama_vocab_n_tokens(llm._model.vocab)
    ctx = _batched_context(llm, llama_cpp, group)
    batch = llama_cpp.llama_batch_init(max(sum(len(s.prompt_tokens) for s in group), 1), 0, 1)
    try:

        def fill(entries: list[tuple[int, int, int, bool]]) -> None:
            for i, (token, position, seq_id, wants_logits) in enumerate(entries):
                batch.token[i] = token
                batch.pos[i] = position
                batch.n_seq_id[i] = 1
                batch.seq_id[i][0] = seq_id
                batch.logits[i] = wants_logits
            batch.n_tokens = len(entries)

        def decode() -> None:
            code = llama_cpp.llama_decode(ctx, batch)
            if code != 0:
                raise RuntimeError(f"llama_decode returned {code}")

        def greedy_token(index: int) -> int:
            logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, index), (n_vocab,))
            return int(np.argmax(logits))

        started = time.perf_counter()
        mem = llama_cpp.llama_get_memory(ctx)
        shared = _shared_prefix(group)
        if shared:
            # The prefix every prompt starts with (a chat template's system turn) is evaluated
            # once and its KV cells copied to every sequence, as the sequential path reuses it
            # from the case before.
            fill([(t, p, 0, False) for p, t in enumerate(group[0].prompt_tokens[:shared])])
            decode()
            for seq_id in range(1, len(group)):
                llama_cpp.llama_memory_seq_cp(mem, 0, seq_id, -1, -1)
        entries: list[tuple[int, int, int, bool]] = []
        rows: dict[int, int] = {}
        for seq_id, seq in enumerate(group):
            last = len(seq.prompt_tokens) - 1
            for position in range(shared, last + 1):
                entries.append((seq.prompt_tokens[position], position, seq_id, position == last))
            rows[seq_id] = len(entries) - 1
        fill(entries)
        decode()
        prefill_done = time.perf_counter()
        live: list[int] = []
        for seq_id, seq in enumerate(group):
            token = greedy_token(rows[seq_id])
            now = time.perf_counter()
            seq.first_at = now
            take_token(llm, llama_cpp, seq, token, now)
            if seq.finish_reason is None:
                live.append(seq_id)
        steps = 0
        while live:
            # A live sequence's last token is its newest position's input.
            fill([(group[s].completion[-1], group[s].next_position - 1, s, True) for s in live])
            step_started = time.perf_counter()
            decode()
            steps += 1
            still: list[int] = []
            for row, seq_id in enumerate(live):
                seq = group[seq_id]
                token = greedy_token(row)
                now = time.perf_counter()
                seq.decode_steps += 1
                seq.decode_s += now - step_started
                take_token(llm, llama_cpp, seq, token, now)
                if seq.finish_reason is None:
                    still.append(seq_id)
                else:
                    llama_cpp.llama_memory_seq_rm(mem, seq_id, -1, -1)
            live = still
        return {
            "started": started,
            "prefill_ms": (prefill_done - started) * 1000,
            "prefill_tokens": shared + len(entries),
            "shared_prefix_tokens": shared,
            "steps": steps,
        }
    finally:
        llama_cpp.llama_batch_free(batch)
        llama_cpp.llama_free(ctx)


def _shared_prefix(group: list[CaseSequence]) -> int:
    """Tokens every prompt of ``group`` starts with, leaving each prompt at least its last
    token to evaluate (its logits choose the first token); 0 for a single sequence."""
    if len(group) < 2:
        return 0
    prompts = [s.prompt_tokens for s in group]
    shortest = min(len(p) for p in prompts) - 1
    common = 0
    while common < shortest and all(p[common] == prompts[0][common] for p in prompts):
        common += 1
    return common


def _kv_bytes_per_cell(llm: Any, llama_cpp: Any) -> int:
    model = llm.model
    head_dim = llama_cpp.llama_model_n_embd(model) // max(llama_cpp.llama_model_n_head(model), 1)
    kv_heads = llama_cpp.llama_model_n_head_kv(model)
    return int(2 * 2 * llama_cpp.llama_model_n_layer(model) * kv_heads * head_dim)


def _batch_groups(sequences: list[CaseSequence], cell_bytes: int) -> list[list[CaseSequence]]:
    """Consecutive cases, as many per context as ``BATCH_MAX_SEQUENCES``, ``BATCH_MAX_CELLS``
    and ``BATCH_MAX_KV_BYTES`` allow (each sequence's stream padded as in
    ``_batched_context``)."""
    max_cells = min(BATCH_MAX_CELLS, BATCH_MAX_KV_BYTES // max(cell_bytes, 1))
    groups: list[list[CaseSequence]] = []
    for seq in sequences:
        if groups:
            group = groups[-1]
            widest = -(-max(max(s.cells for s in group), seq.cells) // BATCH_CELL_PAD)
            widest *= BATCH_CELL_PAD
            if len(group) < BATCH_MAX_SEQUENCES and widest * (len(group) + 1) <= max_cells:
                group.append(seq)
                continue
        groups.append([seq])
    return groups


def generate_batched(
    llm: Any,
    llama_cpp: Any,
    np: Any,
    items: list[dict[str, Any]],
    request: dict[str, Any],
    has_template: bool,
) -> list[dict[str, Any]]:
    """Every case of the suite as parallel sequences (see the module docstring)."""
    sequences = [prompt_sequence(llm, item, request, has_template) for item in items]
    generations: list[dict[str, Any]] = []
    groups = _batch_groups(sequences, _kv_bytes_per_cell(llm, llama_cpp))
    for index, group in enumerate(groups):
        shared = _decode_group(llm, llama_cpp, np, group)
        started = shared["started"]
        for seq in group:
            generations.append(
                _batched_generation(llm, llama_cpp, seq, started)
                | {
                    "batched": True,
                    "batch_size": len(group),
                    "batch_index": index,
                    "batch_prefill_tokens": shared["prefill_tokens"],
                    "batch_prefill_ms": round(shared["prefill_ms"], 2),
                    "batch_shared_prefix_tokens": shared["shared_prefix_tokens"],
                    "batch_decode_steps": shared["steps"],
                }
            )
    return generations


def _batched_generation(
    llm: Any, llama_cpp: Any, seq: CaseSequence, started: float
) -> dict[str, Any]:
    vocab = llm._model.vocab
    stopped_by_eos = (
        seq.finish_reason == "stop"
        and seq.end is not None
        and bool(llama_cpp.llama_vocab_is_eog(vocab, seq.end))
    )
    end_token = None
    if stopped_by_eos and seq.end is not None:
        end_token = llama_cpp.llama_vocab_get_text(vocab, seq.end).decode("utf-8", errors="replace")
    assert seq.first_at is not None and seq.finished_at is not None
    ttft_ms = (seq.first_at - started) * 1000
    decode_ms = seq.decode_s * 1000
    return generation_fields(seq.item, seq.use_chat, seq.has_template) | {
        "output": seq.text.decode("utf-8", errors="ignore"),
        "finish_reason": seq.finish_reason,
        "stopped_by_eos": stopped_by_eos,
        "end_token": end_token,
        "max_tokens": seq.max_tokens,
        "prompt_tokens": len(seq.prompt_tokens),
        "completion_tokens": len(seq.completion),
        "prompt_eval_tokens": len(seq.prompt_tokens),
        # The shared prefill: every prompt of the batch, evaluated together.
        "prompt_ms": round(ttft_ms, 2),
        "decode_tokens": seq.decode_steps,
        "decode_ms": round(decode_ms, 2),
        "generation_ms": round(decode_ms, 2),
        "ttft_ms": round(ttft_ms, 2),
        "wall_ms": round((seq.finished_at - started) * 1000, 2),
    }


def generation_fields(item: dict[str, Any], use_chat: bool, has_template: bool) -> dict[str, Any]:
    """What every generation reports about the case it answered and how it was asked."""
    return {
        "id": item.get("id"),
        "prompt": item["prompt"],
        "expect": item.get("expect"),
        "mode": "chat" if use_chat else "completion",
        "chat_template": "model" if use_chat and has_template else None,
    }
