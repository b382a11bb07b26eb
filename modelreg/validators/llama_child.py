"""Child process for the GGUF checks: probe the llama.cpp build, then (if asked and the host can
run it) load the model once and run every prompt through it greedily. Run as
``python -m modelreg.validators.llama_child``.

Request (stdin, JSON): model_path, prompts [{id, prompt, chat, max_tokens, expect}], n_ctx,
n_threads, max_tokens (default per prompt), seed, host_flags, load; optionally
``logits: {text, n_tokens, path, token_ids}`` to write the next-token logits of a fixed text
(see ``agreement``), and ``probe: {n_ctx, tokens, type_k, type_v, deadline_s}`` to measure a
served context after the generations (see ``_probe``), and ``traffic: {warmup, repeat,
concurrency, cases}`` to measure latency like traffic after them (see ``_traffic``).
Response (stdout, one JSON line): status is one of ``no_runtime``, ``incompatible``,
``probed``, ``load_error``, ``ok``, with versions, compiled system info, timings and the child's
peak RSS. Each generation carries its output, ``finish_reason`` (``stop`` / ``length``),
``stopped_by_eos`` and the end token, token counts, ``ttft_ms``, prompt and decode timings.
Every generation says ``batched`` and ``batch_size``.

A suite of more than one case runs batched unless the request says ``batched: false``: every
case is a sequence (its own seq_id and KV stream) of one context beside the model's own.
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
With a probe, ``probe`` holds its ``status`` (``ok``, ``timeout`` or ``error``), tokens
evaluated, prompt ms and tokens/s, and the peak RSS of the probe's phase.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from modelreg.validators.child import reserve_stdout, respond
from modelreg.validators.cpu_features import build_features, missing_flags
from modelreg.validators.resources import mapped_libraries, peak_rss_bytes

LOG_LINES_KEPT = 400
CHILD_ARGV = (sys.executable, "-m", "modelreg.validators.llama_child")


def prestart(memory_limit_bytes: int | None = None) -> Any:
    """A llama.cpp runtime child started now, waiting for its request: give it to
    ``Registry.verify(prestarted=…)`` so that llama_cpp imports while the registry is read
    (the verify uses it, or discards it when nothing runs)."""
    from modelreg.validators.child import RuntimeChild

    return RuntimeChild(CHILD_ARGV, memory_limit_bytes=memory_limit_bytes)


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
# A batched suite's contexts: at most this many sequences, and KV cells, per context (the rest
# go to the next context); each sequence's KV stream is rounded up to whole pads.
BATCH_MAX_SEQUENCES = 32
BATCH_MAX_CELLS = 16384
BATCH_CELL_PAD = 256
# ... and at most this much KV cache (an f16 estimate) beside the model's own context.
BATCH_MAX_KV_BYTES = 512 * 1024**2
# A sequence decodes up to 3 tokens past its budget to finish a UTF-8 character.
UTF8_OVERRUN = 3
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
    use_chat = _use_chat(item, has_template)
    watch = _GreedyWatch(np)
    greedy = _greedy(item, request)
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
    return _generation_fields(item, use_chat, has_template) | {
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


class _PromptCaptured(Exception):
    """Raised by the stand-in for ``Llama.generate``: llama-cpp-python has built the prompt."""


@dataclass
class _Sequence:
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


def _use_chat(item: dict[str, Any], has_template: bool) -> bool:
    chat = item.get("chat")
    return has_template if chat is None else bool(chat)


def _greedy(item: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
    return {
        "max_tokens": int(item.get("max_tokens") or request["max_tokens"]),
        "temperature": 0.0,
        "top_k": 1,
        "repeat_penalty": 1.0,
        "seed": request["seed"],
    }


def _prompt_sequence(
    llm: Any, item: dict[str, Any], request: dict[str, Any], has_template: bool
) -> _Sequence:
    """The case's prompt tokens and stop strings, taken from llama-cpp-python's own
    ``create_chat_completion`` / ``create_completion`` (chat template, BOS and special-token
    handling included) by standing in for ``generate``: the batched prompt cannot drift from
    the sequential one."""
    use_chat = _use_chat(item, has_template)
    greedy = _greedy(item, request)
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
    return _Sequence(
        item=item,
        use_chat=use_chat,
        has_template=has_template,
        prompt_tokens=prompt,
        stop_sequences=[s.encode("utf-8") for s in stop],
        max_tokens=max_tokens,
    )


def _take_token(llm: Any, llama_cpp: Any, seq: _Sequence, token: int, now: float) -> None:
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


def _batched_context(llm: Any, llama_cpp: Any, group: list[_Sequence]) -> Any:
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


def _decode_group(llm: Any, llama_cpp: Any, np: Any, group: list[_Sequence]) -> dict[str, Any]:
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
            _take_token(llm, llama_cpp, seq, token, now)
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
                _take_token(llm, llama_cpp, seq, token, now)
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


def _shared_prefix(group: list[_Sequence]) -> int:
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


def _batch_groups(sequences: list[_Sequence], cell_bytes: int) -> list[list[_Sequence]]:
    """Consecutive cases, as many per context as ``BATCH_MAX_SEQUENCES``, ``BATCH_MAX_CELLS``
    and ``BATCH_MAX_KV_BYTES`` allow (each sequence's stream padded as in
    ``_batched_context``)."""
    max_cells = min(BATCH_MAX_CELLS, BATCH_MAX_KV_BYTES // max(cell_bytes, 1))
    groups: list[list[_Sequence]] = []
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


def _generate_batched(
    llm: Any,
    llama_cpp: Any,
    np: Any,
    items: list[dict[str, Any]],
    request: dict[str, Any],
    has_template: bool,
) -> list[dict[str, Any]]:
    """Every case of the suite as parallel sequences (see the module docstring)."""
    sequences = [_prompt_sequence(llm, item, request, has_template) for item in items]
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


def _batched_generation(llm: Any, llama_cpp: Any, seq: _Sequence, started: float) -> dict[str, Any]:
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
    return _generation_fields(seq.item, seq.use_chat, seq.has_template) | {
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


TRAFFIC_BATCHING = (
    "continuous batching in one llama.cpp context of {c} slot(s), one KV stream each: a closed "
    "loop of {c} client(s) — a request enters a slot as soon as one frees, its prompt "
    "prefilled in the same llama_decode as the other slots' next tokens; no prompt cache "
    "between requests; TTFT from the request's entry to its first token"
)


def _fresh(template: _Sequence) -> _Sequence:
    return _Sequence(
        item=template.item,
        use_chat=template.use_chat,
        has_template=template.has_template,
        prompt_tokens=list(template.prompt_tokens),
        stop_sequences=template.stop_sequences,
        max_tokens=template.max_tokens,
    )


def _closed_loop(
    llm: Any, llama_cpp: Any, np: Any, queue: list[_Sequence], slots: int
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
        running: dict[int, _Sequence] = {}
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
                _take_token(llm, llama_cpp, seq, int(np.argmax(logits)), now)
                if seq.finish_reason is not None:
                    del running[slot]
                    llama_cpp.llama_memory_seq_rm(mem, slot, -1, -1)
        return {"wall_ms": round((time.perf_counter() - started) * 1000, 2), "most": most}
    finally:
        llama_cpp.llama_batch_free(batch)
        llama_cpp.llama_free(ctx)


def _traffic(
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
        templates = [_prompt_sequence(llm, item, request, has_template) for item in items]
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


def _generation_fields(item: dict[str, Any], use_chat: bool, has_template: bool) -> dict[str, Any]:
    return {
        "id": item.get("id"),
        "prompt": item["prompt"],
        "expect": item.get("expect"),
        "mode": "chat" if use_chat else "completion",
        "chat_template": "model" if use_chat and has_template else None,
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
    items = request.get("prompts") or []
    from jinja2.exceptions import SecurityError

    try:
        if request.get("batched", True) and len(items) > 1:
            generations = _generate_batched(llm, llama_cpp, np, items, request, has_template)
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
        extra["traffic"] = _traffic(llm, llama_cpp, np, asked, request, has_template, traffic_spec)
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
