"""The judge on real broken weights (issue 24 item 7): damaged copies of SmolLM2 and Gemma 3
load fine and answer garbage, and the judge must call that degenerate — not no_stop, which
sends the on-call to the chat template — while the healthy originals are not degenerate.

Every output comes from llama-cpp-python decoding greedily, as the runtime child does
(modelreg.validators.llama_child); nothing is mocked. The outputs quoted below are those of
llama-cpp-python 0.3.36 as `make install` builds it (portable AVX2 kernels).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from modelreg.schemas.suite import Classification, Expectation, FinishReason, Generation
from modelreg.validators.judge import judge
from tests.helpers import scale_token_embedding
from tests.validators.damage import flip_blocks

MAX_TOKENS = 32
N_CTX = 512
# One thread, for the prompt too (n_threads_batch defaults to every core): a few hundred
# tokens of a small model are little work, and llama.cpp's threads spin-wait for each other.
# 96 SmolLM2 tokens on a busy 2-core host: 7.2 s of CPU with two prompt threads, 1.35 s with one.
THREADS = 1
# As llama_batched.greedy_settings decodes: the argmax, no repetition penalty.
GREEDY: dict[str, Any] = {
    "max_tokens": MAX_TOKENS,
    "temperature": 0.0,
    "top_k": 1,
    "repeat_penalty": 1.0,
    "seed": 0,
}
COMPLETION = "The capital of France is"
CHAT = "What is the capital of France? Answer in one word."
SEA = "Write one sentence about the sea."  # asked of the healthy models only: a longer answer
# Gemma 3 270M is a base model without a chat template: the runtime child gives it bare
# prompts, and so do we.
GEMMA_PROMPTS = (COMPLETION, "Q: What is the capital of France?\nA:")
PARIS = Expectation(value="Paris")


@dataclass(frozen=True)
class Damage:
    id: str
    model: str  # the fixture of the original: smollm2 or gemma
    make: Callable[[Path, Path], Path]


def _scaled(factor: float) -> Callable[[Path, Path], Path]:
    return lambda src, dst: scale_token_embedding(src, dst, factor)


def _flipped(tensor: str) -> Callable[[Path, Path], Path]:
    return lambda src, dst: flip_blocks(src, dst, tensor)


# What each copy says (the completion, then the chat answer). Tried and left out: every block
# of blk.0.attn_q inverted still answers fluently (" Paris.\n\nThe answer is 2."); blk.5.attn_v
# answers "" to everything (the old empty rule; test_judge has it); Gemma with blk.0.attn_q or
# blk.8.ffn_up inverted answers fluently ("the capital of the French Republic. It is the seat
# of the 12th and 13th arrondissements"), with blk.3/5/12.ffn_down or blk.10.attn_output
# inverted it answers "". Garbage the shape rules do not see (judged no_stop or wrong_answer):
# every 7th block of blk.15.ffn_up (" areoutheastern\n derives twoceeds, oneumn,|'\\aseous
# anday otherEffectiveymialay"), blk.10.ffn_gate ("necessitide,f and forhall',end-idatingian
# oming andusingomson ( gills andsole"): short real-looking subwords, which only a vocabulary
# would tell from words.
DAMAGES = (
    # "\n\nterter(CCC((',',''''''''''''''''''''" / "\n\n11.\n''1.\n\n2'1.'1''''.'''''''''"
    Damage("smollm2-embedding-x1/53", "smollm2", _scaled(1 / 53)),
    # " the most popular destination in the world." and 24 line breaks / ""
    Damage("smollm2-embedding-x8", "smollm2", _scaled(8)),
    # "_ what is is is land- wis.-tailededs," and 18 line breaks / 32 line breaks
    Damage("smollm2-embedding-x30", "smollm2", _scaled(30)),
    # "oflavscribeaughedennis arocal__\":ingoutheastern setattrounter,  leastaughteredayama…" /
    # " interpreayamaя following elifzig other onlyunsqueeze greatamenoscow whatRomːinders…"
    Damage("smollm2-blk.10.ffn_down-inverted", "smollm2", _flipped("blk.10.ffn_down.weight")),
    # " Hyderbianphsoutheasternːztcondsare.aughedethelessALT includably fundamenterc…" /
    # " duringoutheastern or(\"\"\"ferşphosphate Utt Buddh safffer maltreatmentareaughed…"
    Damage("smollm2-blk.2.ffn_down-inverted", "smollm2", _flipped("blk.2.ffn_down.weight")),
    # " commenceicismounteredhementeks nonATSemeteryessorsя whereasːymourutes…" /
    # " fundamentrustnaiяrequentlysersevelopedthelessthelessthelessaughed…" (one token)
    Damage("smollm2-blk.20.ffn_down-inverted", "smollm2", _flipped("blk.20.ffn_down.weight")),
    # "CovaughedChannelTypeectinikipediaqueezequeezequeeze…ChannelTypeailureChannelType" /
    # " etduateailureernessailureailureailure…ChannelTypeailureailureChannelType"
    Damage("smollm2-blk.29.ffn_down-inverted", "smollm2", _flipped("blk.29.ffn_down.weight")),
    # "outheasternːːerc oːː twoːːIREDːː midːː Tː saffːounteredːː…" /
    # "ːː Oː midː mid, saffː requiredennːFAO crossː saffː requiredː; saffːaseous…"
    Damage("smollm2-blk.3.attn_output-inverted", "smollm2", _flipped("blk.3.attn_output.weight")),
    # The Gemma bug itself: embeddings without their √hidden_size (√640) scale.
    # ", \\\\々\r\r\r\"},{\"\"},{\"\"},…,子,,,, ,,,,,,,,,,," / " \\\\ \\\\\r\r\r…⟩⟩⟩⟩⟩⟩⟩"
    Damage("gemma-embedding-x1/sqrt640", "gemma", _scaled(640**-0.5)),
)


def _generate(path: Path, completions: tuple[str, ...], chats: tuple[str, ...]) -> list[Generation]:
    """Greedy generations of the model at ``path``: plain completions, then chat turns."""
    import llama_cpp

    llm = llama_cpp.Llama(
        model_path=str(path),
        n_ctx=N_CTX,
        n_threads=THREADS,
        n_threads_batch=THREADS,
        n_gpu_layers=0,
        seed=0,
        verbose=False,
    )
    generations = []
    try:
        for prompt in completions + chats:
            chat = prompt in chats
            if chat:
                messages = [{"role": "user", "content": prompt}]
                reply: Any = llm.create_chat_completion(messages=messages, **GREEDY)
                output = reply["choices"][0]["message"]["content"] or ""
            else:
                reply = llm.create_completion(prompt, **GREEDY)
                output = reply["choices"][0]["text"]
            finish = reply["choices"][0]["finish_reason"]
            generations.append(
                Generation(
                    prompt=prompt,
                    output=output,
                    chat=chat,
                    finish_reason=FinishReason(finish),
                    stopped_by_eos=finish == "stop",
                    max_tokens=MAX_TOKENS,
                    completion_tokens=reply["usage"]["completion_tokens"],
                )
            )
    finally:
        llm.close()
    return generations


def _prompts(model: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    return ((COMPLETION,), (CHAT,)) if model == "smollm2" else (GEMMA_PROMPTS, ())


@pytest.fixture(scope="module", params=DAMAGES, ids=[d.id for d in DAMAGES])
def damaged(
    request: pytest.FixtureRequest, smollm2: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Damage, list[Generation]]:
    """A damaged copy's generations (the copy, 98 or 253 MB, is deleted once it has spoken)."""
    damage: Damage = request.param
    original: Path = smollm2 if damage.model == "smollm2" else request.getfixturevalue("gemma")
    copy = tmp_path_factory.mktemp("damaged") / "model.gguf"
    damage.make(original, copy)
    try:
        return damage, _generate(copy, *_prompts(damage.model))
    finally:
        copy.unlink()


@pytest.fixture(scope="module")
def healthy(smollm2: Path, gemma: Path) -> dict[str, list[Generation]]:
    return {
        "smollm2": _generate(smollm2, (COMPLETION,), (CHAT, SEA)),
        "gemma": _generate(gemma, *_prompts("gemma")),
    }


def test_damaged_weights_are_judged_degenerate(
    damaged: tuple[Damage, list[Generation]],
) -> None:
    damage, generations = damaged
    verdicts = [(g, judge(g, PARIS)) for g in generations]
    missed = [
        f"{g.output!r}: {v.classification} ({v.reason})"
        for g, v in verdicts
        if v.classification is not Classification.DEGENERATE
    ]
    assert not missed, f"{damage.id} not judged degenerate: {missed}"
    assert all("\n" not in v.reason for _, v in verdicts)


def test_healthy_models_are_not_degenerate(healthy: dict[str, list[Generation]]) -> None:
    for model, generations in healthy.items():
        for generation in generations:
            verdict = judge(generation, PARIS)
            assert verdict.classification is not Classification.DEGENERATE, (
                f"{model} {generation.output!r}: {verdict.reason}"
            )
    # The answer is still read after the new rules: SmolLM2 says "The capital of France is
    # Paris." and ends its turn.
    chat = healthy["smollm2"][1]
    assert judge(chat, PARIS).classification is Classification.PASS, chat.output
