"""No catastrophic backtracking in the card reader: every pattern of ``card_claims`` (and the
reader as a whole) finishes in time linear in its input, whatever runs of digits, spaces and
separators a card holds. Each input has a time bound, not a benchmark: the quadratic and
cubic patterns this replaced took 0.6 s on 600 spaces and minutes on 20 KB."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from modelreg.manifests import card_claims, card_korean, card_language

PATTERNS = {
    f"{module.__name__.rsplit('.', 1)[1]}.{name}": value
    for module in (card_claims, card_korean, card_language)
    for name, value in vars(module).items()
    if isinstance(value, re.Pattern)
}
PATTERNS |= {f"card_korean._BPW_RES[{i}]": p for i, p in enumerate(card_korean._BPW_RES)} | {
    f"card_korean.{name}[{i}]": p
    for name in ("_CONTEXT_RES", "_PARAMS_RES", "_LICENSE_RES")
    for i, p in enumerate(getattr(card_korean, name))
}
# Each pattern, and the whole reader, gets this long per input (they take milliseconds).
SECONDS_PER_INPUT = 1.0
# The pieces a hostile card repeats: digits, every kind of space, the separators numbers and
# labels use, scale letters and unit words (English and Korean), Markdown marks.
PIECES = [
    "1", "0", "9", " ", "\t", "\u3000", ",", "_", ".", "-", ":", "=", "|", "/", "[", "]", "(",
    ")", "*", "#", "K", "k", "M", "B", "T", "x", "e", "bit", "bits", "per", "weight", "token",
    "context", "active", "total", "parameters", "tp", "seq_len", "license", "under", "Q4_K_M",
    "만", "천", "억", "비트", "토큰", "개", "양자화", "파라미터", "컨텍스트", "길이", "수", "당",
    "가중치", "라이선스",
]  # fmt: skip


def _slowest(text: str) -> tuple[float, str]:
    """The longest time one pattern (or the reader) took on ``text``, and which."""
    times = []
    for name, pattern in PATTERNS.items():
        start = time.perf_counter()
        for _ in pattern.finditer(text):
            pass
        pattern.match(text)
        times.append((time.perf_counter() - start, name))
    start = time.perf_counter()
    card_claims.read_claims(text)
    card_claims.read_claims(text.replace("\n", " "))
    times.append((time.perf_counter() - start, "read_claims"))
    start = time.perf_counter()
    card_language.card_language(text)
    card_korean.korean_number(text[:200])
    times.append((time.perf_counter() - start, "card_language"))
    return max(times)


def test_the_module_has_its_patterns() -> None:
    # The enumeration finds them (a renamed module would make every other test vacuous).
    names = {"_BPW_RE", "_CONTEXT_SENTENCE_RE", "_PARAMS_SENTENCE_RE", "_LABEL_LINE_RE"}
    assert {f"card_claims.{name}" for name in names} <= set(PATTERNS)
    assert {"card_korean._BITS_RE", "card_korean._PARAMS_RES[1]"} <= set(PATTERNS)
    assert "card_language._URL_RE" in PATTERNS


@pytest.mark.parametrize(
    "text",
    [
        "1" * 20_000,
        "1" + " " * 20_000,
        "1" + "\t" * 20_000 + "x",
        "1 " * 10_000,
        "1," * 10_000,
        "1_000" * 4_000,
        "1." * 10_000,
        "1 K " * 5_000,
        "[" * 20_000,
        "[a](" * 5_000,
        "a" * 20_000,
        "a/" * 10_000,
        "- " * 10_000,
        "Context length:" + " " * 20_000,
        "tp" + " " * 20_000 + "=",
        "licensed under " + " " * 20_000,
        "1" * 10_000 + " " * 10_000,
        "3만" * 7_000,
        "3만 " * 5_000 + "2천" * 5_000,
        "1" + " " * 20_000 + "비트",
        "가중치당" + " " * 20_000 + "4",
        "1" * 20_000 + "비트/가중치",
        "A " * 10_000 + "라이선스",
        "라이선스는 " + "A " * 10_000,
        "a/b를" + " x" * 10_000,
        "https://" + "a" * 20_000,
        "컨텍스트" + " " * 20_000 + "는",
    ],
    ids=lambda text: f"{text[:8]!r}x{len(text)}",
)
def test_long_runs_finish_within_the_bound(text: str) -> None:
    took, name = _slowest(text)
    assert took < SECONDS_PER_INPUT, f"{name} took {took:.2f} s on {len(text)} characters"


@settings(
    max_examples=60,
    deadline=None,  # the bound is checked per pattern below, on the pattern's own time
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    st.lists(
        st.tuples(st.sampled_from(PIECES), st.integers(min_value=1, max_value=4_000)),
        min_size=1,
        max_size=6,
    )
)
def test_any_runs_of_digits_spaces_and_separators_finish_within_the_bound(
    runs: list[tuple[str, int]],
) -> None:
    text = "".join(piece * count for piece, count in runs)[:30_000]
    took, name = _slowest(text)
    assert took < SECONDS_PER_INPUT, f"{name} took {took:.2f} s on {text[:60]!r}…"


def test_a_20_kb_card_of_hostile_lines_validates_quickly(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from modelreg.validators.card import validate_card

    lines = ["---", "license: mit", "---", "# Title"]
    lines += ["Parameters: " + "1" * 3_000 + " " * 3_000, "1" + " " * 5_000 + "x"]
    lines += ["Context " + "9," * 2_000, "컨텍스트 길이: " + "3만 " * 1_000]
    card = tmp_path / "README.md"
    card.write_text("\n".join(lines) + "\n")
    assert card.stat().st_size > 20_000
    start = time.perf_counter()
    validate_card(card)
    assert time.perf_counter() - start < 5 * SECONDS_PER_INPUT
