"""Model-card claims written in Korean: the labels (``양자화``, ``컨텍스트 길이``, ``파라미터
수``, ``라이선스``, ``기본 모델`` …), Korean numerals (``3만 2천``, ``260억``), units (``비트``,
``토큰``, ``개``) and the sentence shapes Korean cards and write-ups use ("가중치당 4.5비트",
"32K 토큰 컨텍스트", "260억 개의 파라미터", "MIT 라이선스로 배포"). ``card_claims`` reads them
beside the English ones and gives the same claims; nothing here judges a claim.

Korean is verb-final, so where English puts the word before the number ("released under the
MIT license", "context of 32K tokens") Korean puts it after ("MIT 라이선스로", "32K 토큰
컨텍스트") or marks the subject with a particle ("컨텍스트 길이는 32K"). The readers stay as
narrow as the English ones: a number counts only beside the words that say what it is, and a
setting ("컨텍스트 길이를 8192로 줄였다", an object particle) is not a claim.

Every pattern runs in linear time (see ``card_claims``): bounded repetitions, possessive runs
of spaces, numbers started at a digit run's edge.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from modelreg.limits import CARD_DECIMALS_MAX, CARD_NUMBER_DIGITS_MAX
from modelreg.manifests.card_words import ClaimKind, license_id, number

_D, _F = CARD_NUMBER_DIGITS_MAX, CARD_DECIMALS_MAX
# Korean numerals: 만 (10^4), 억 (10^8), 조 (10^12) group the digits by four; 천, 백, 십 count
# inside a group ("3억 6천만" is 3×10^8 + 6,000×10^4 = 360,000,000; "3만 2천" is 32,000).
BIG_UNITS = {"조": 10**12, "억": 10**8, "만": 10**4}
SMALL_UNITS = {"천": 1000, "백": 100, "십": 10}
_UNIT = "[조억만천백십]"
# A numeral: digits and a unit, then at most seven more (digits and) units, then the digits
# below the last unit ("3만 2768"). Not after a letter: "FP8만" is "only FP8" (만 is also the
# particle "only"), not 80,000.
KOREAN_NUMERAL = (
    rf"(?<![A-Za-z0-9_.])(?P<ko>\d{{1,4}}(?:\.\d{{1,{_F}}})?[ ]?{_UNIT}"
    rf"(?:[ ]?\d{{0,4}}[ ]?{_UNIT}){{0,7}}+(?:[ ]?\d{{1,4}}(?![\d.]))?+)"
)
_KOREAN_NUMERAL_RE = re.compile(KOREAN_NUMERAL)
_NUMERAL_PART_RE = re.compile(rf"(\d{{1,4}}(?:\.\d{{1,{_F}}})?)?[ ]?({_UNIT})")
# An ASCII number, as card_claims reads it, optionally with an English scale letter ("360M",
# "32K"); the letter may be followed by a Korean counter or particle ("360M개의").
_ASCII = (
    rf"(?<![\d.])(?<!\d[,_])(?P<n>(?>\d{{1,3}}(?:[,_]\d{{3}}){{1,{(_D - 1) // 3}}}+(?!\d|[,_]\d)"
    rf"|\d{{1,{_D}}}+(?:\.\d{{1,{_F}}}+)?+(?![\d]|\.\d)))"
    r"(?:\s*+(?P<s>[KMBTkmbt](?![A-Za-z0-9_])|(?i:thousand|million|billion|trillion)))?"
)
AMOUNT = rf"(?:{KOREAN_NUMERAL}|{_ASCII})"
_AMOUNT_RE = re.compile(AMOUNT)

# Label (lower-cased, spaces collapsed) -> claim kind, as card_claims' English _LABELS.
KOREAN_LABELS: dict[str, ClaimKind] = {
    "양자화": "quantization",
    "양자화 방식": "quantization",
    "양자화 유형": "quantization",
    "양자화 타입": "quantization",
    "양자화 형식": "quantization",
    "퀀트": "quantization",
    "컨텍스트": "context_length",
    "컨텍스트 길이": "context_length",
    "최대 컨텍스트": "context_length",
    "최대 컨텍스트 길이": "context_length",
    "컨텍스트 창": "context_length",
    "컨텍스트 윈도우": "context_length",
    "컨텍스트 크기": "context_length",
    "문맥 길이": "context_length",
    "최대 문맥 길이": "context_length",
    "시퀀스 길이": "sequence_length",
    "최대 시퀀스 길이": "sequence_length",
    "텐서 병렬": "tp_degree",
    "텐서 병렬 차수": "tp_degree",
    "텐서 병렬화": "tp_degree",
    "배치 크기": "batch_size",
    "파라미터": "parameters",
    "파라미터 수": "parameters",
    "총 파라미터": "parameters",
    "총 파라미터 수": "parameters",
    "전체 파라미터": "parameters",
    "전체 파라미터 수": "parameters",
    "매개변수": "parameters",
    "매개변수 수": "parameters",
    "모델 크기": "parameters",
    "활성 파라미터": "active_parameters",
    "활성 파라미터 수": "active_parameters",
    "활성화 파라미터": "active_parameters",
    "활성화된 파라미터": "active_parameters",
    "활성 매개변수": "active_parameters",
    "라이선스": "license",
    "라이센스": "license",
    "기본 모델": "base_model",
    "베이스 모델": "base_model",
    "원본 모델": "base_model",
    "기반 모델": "base_model",
    "양자화 원본": "base_model",
}

_TOPIC = r"(?:는|은|가|이)"  # the particle that makes the words before it what is stated
_BPW_RES = (
    re.compile(
        r"가중치\s*+(?:하나\s*+)?당\s*+(?:평균\s*+|약\s*+|실제\s*+|실질\s*+)?"
        rf"(?<![\d.])(?P<n>\d{{1,3}}+(?:\.\d{{1,{_F}}}+)?+)(?![\d]|\.\d)\s*+비트"
    ),
    re.compile(
        rf"(?<![\d.])(?P<n>\d{{1,3}}+(?:\.\d{{1,{_F}}}+)?+)(?![\d]|\.\d)\s*+비트\s*+/\s*+가중치"
    ),
)
_BITS_RE = re.compile(
    rf"(?<![\w.])(?P<n>\d{{1,3}}+(?:\.\d{{1,{_F}}}+)?+)(?![\d]|\.\d)[ -]?비트(?!\s*+/\s*+가중치)"
)
_CONTEXT_RES = (
    # "32K 토큰 컨텍스트", "3만 2천 토큰의 문맥"
    re.compile(AMOUNT + r"\s*+(?:개의?\s*+)?토큰(?:의)?\s*+(?:컨텍스트|문맥|context)"),
    # "컨텍스트 길이는 최대 32K 토큰"
    re.compile(
        rf"(?:컨텍스트|문맥)\s*+(?:길이|창|윈도우|크기)?\s*+{_TOPIC}\s*+(?:최대\s*+|약\s*+)?"
        + AMOUNT
    ),
)
_PARAM_WORD = r"(?:파라미터|매개변수)"
_PARAMS_RES = (
    # "260억 개의 파라미터", "3.3B 활성 파라미터"
    re.compile(
        rf"(?:(?P<total>총|전체)\s*+)?{AMOUNT}\s*+(?:개의?\s*+)?"
        rf"(?:(?P<active>활성(?:화된?)?)\s*+)?{_PARAM_WORD}"
    ),
    # "파라미터 수는 360M", "활성 파라미터는 3.3B"
    re.compile(
        rf"(?:(?P<active>활성(?:화된?)?)\s*+|(?P<total>총|전체)\s*+)?{_PARAM_WORD}\s*+(?:수\s*+)?"
        rf"{_TOPIC}\s*+(?:약\s*+)?" + AMOUNT
    ),
)
# "MIT 라이선스로 배포", "Apache 2.0 라이선스에 따라"; "라이선스는 MIT입니다"
_LICENSE_RES = (
    re.compile(
        r"(?<![A-Za-z0-9.-])(?P<name>[A-Za-z][A-Za-z0-9 .-]{0,40}?)\s*+라이[선센]스"
        r"(?:로|에\s*+따라|하에|를\s*+따릅|가\s*+적용)"
    ),
    re.compile(
        rf"라이[선센]스{_TOPIC}\s*+(?P<name>[A-Za-z][A-Za-z0-9 .-]{{0,40}}?)\s*+(?:라이[선센]스)?"
        r"(?:입니다|이며|이고|이다|로|$|[.,](?!\d))"
    ),
)
# After an org/name: "Qwen/Qwen3-8B를 양자화한", "…의 GGUF 변환", "…를 llama.cpp b4500으로
# 양자화한" (the verb within a few words of the particle).
# (Starting only where a run of spaces starts, like card_claims._LABEL_ASIDE_RE.)
BASE_AFTER_RE = re.compile(
    r"(?<!\s)\s*+(?:을|를|의|에서|으로부터|로부터)"
    r"(?:\s++(?!양자화|변환|컴파일)\S{1,30}+(?<![.。!?])){0,3}+\s++(?:양자화|변환|컴파일)"
)
_TP_RE = re.compile(
    r"텐서\s*+병렬(?:화|도)?\s*+(?:차수\s*+)?(?:" + _TOPIC + r"\s*+)?(?:[=:]\s*+)?"
    rf"(?P<n>\d{{1,{_D}}}+)(?!\d)"
)
_SEQ_RE = re.compile(
    r"시퀀스\s*+길이\s*+(?:" + _TOPIC + r"\s*+)?(?:[=:]\s*+)?(?:최대\s*+)?" + _ASCII
)
# A size in a Korean family sentence ("135M, 360M, 17억"): counted like card_claims' sizes.
SIZE_RE = re.compile(r"(?<![\w.])\d{1,4}+(?:\.\d{1,3}+)?+\s*+[억조]")


def korean_number(text: str) -> float | None:
    """The value of a Korean numeral (``3만 2천`` = 32,000, ``3억 6천만`` = 360,000,000,
    ``260억`` = 26,000,000,000), None when its units are out of order (``1만 1만``)."""
    total = 0.0
    section = 0.0
    last_big = last_small = 10**13
    end = 0
    for part in _NUMERAL_PART_RE.finditer(text):
        digits, unit = part.group(1), part.group(2)
        if text[end : part.start()].strip():
            return None
        end = part.end()
        value = float(digits) if digits else None
        if unit in SMALL_UNITS:
            if SMALL_UNITS[unit] >= last_small:
                return None
            section += (1 if value is None else value) * SMALL_UNITS[unit]
            last_small = SMALL_UNITS[unit]
        else:
            if BIG_UNITS[unit] >= last_big:
                return None
            section += value or 0
            total += (section or 1) * BIG_UNITS[unit]
            section, last_small, last_big = 0.0, 10**13, BIG_UNITS[unit]
    rest = text[end:].strip()
    if rest:
        if not rest.isdigit():
            return None
        section += int(rest)
    return total + section


def amount(match: re.Match[str], *, tokens: bool = False) -> int | None:
    """The count an ``AMOUNT`` match states: a Korean numeral's value, or the ASCII number
    times its scale (``tokens``: K is 1,024 — "32K" of context is 32,768 — and M, B, T are not
    token counts)."""
    if match.group("ko"):
        value = korean_number(match.group("ko"))
        return None if value is None else int(value)
    scale = match.group("s")
    if tokens:
        if scale and scale.lower() != "k":
            return None
        return int(number(match.group("n"))) * (1024 if scale else 1)
    return int(number(match.group("n"), scale))


def first_amount(text: str, *, tokens: bool = False) -> int | None:
    """The first count in a label's value ("3만 2천 토큰", "32,768", "360M개")."""
    match = _AMOUNT_RE.search(text)
    return None if match is None else amount(match, tokens=tokens)


def read_sentence(text: str, i: int, add: Callable[..., Any], family: bool) -> None:
    """The Korean claims of one line of prose (``family``: the line names more than one model
    size, so only a count called total or active is this model's)."""
    per_weight: list[tuple[int, int]] = []
    for pattern in _BPW_RES:
        for m in pattern.finditer(text):
            per_weight.append(m.span())
            add("bits_per_weight", float(m.group("n")), i, "sentence")
    for m in _BITS_RE.finditer(text):
        if not any(start <= m.start() < stop for start, stop in per_weight):
            add("bits", float(m.group("n")), i, "sentence")
    for pattern in _CONTEXT_RES:
        for m in pattern.finditer(text):
            tokens = amount(m, tokens=True)
            if tokens is not None:
                add("context_length", tokens, i, "sentence")
    for m in _SEQ_RE.finditer(text):
        if m.group("s") is None:
            add("sequence_length", int(float(m.group("n").replace(",", ""))), i, "sentence")
    for m in _TP_RE.finditer(text):
        add("tp_degree", int(m.group("n")), i, "sentence")
    seen: set[int] = set()
    for pattern in _PARAMS_RES:
        for m in pattern.finditer(text):
            if m.start() in seen or (family and not (m.group("active") or m.group("total"))):
                continue
            seen.add(m.start())
            count = amount(m)
            if count is not None:
                kind = "active_parameters" if m.group("active") else "parameters"
                add(kind, count, i, "sentence")
    for pattern in _LICENSE_RES:
        licensed = pattern.search(text)
        if licensed and (found := license_id(licensed.group("name"))):
            add("license", found, i, "sentence")
            break
