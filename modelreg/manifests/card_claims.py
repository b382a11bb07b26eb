"""The claims a model card's body makes, read from the shapes Hugging Face cards are written
in: the title, ``Label: value`` lines (bulleted or bold), Markdown tables — a GGUF repo's
table of quant files, a spec table (``| Context Length | 32,768 |``) — and sentences ("a
4-bit quantization", "a 32K token context", "released under the MIT license").

Each claim keeps the card line it came from and that line, so that a finding can quote its
source. Nothing here judges a claim: ``validators.card`` compares them with the record. The
readers are deliberately narrow — a quant name counts only in the title, a labelled line or a
quant table's row; a number only beside the words that say what it is — so that prose about
other models (a comparison table, a KV-cache setting) is not read as a claim about this one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from modelreg.limits import CARD_DECIMALS_MAX, CARD_NUMBER_DIGITS_MAX
from modelreg.manifests import card_korean
from modelreg.manifests.card_words import ClaimKind, license_id, number

Where = Literal["front matter", "title", "label", "table", "sentence"]

# GGUF file-type names (llama.cpp's LlamaFileType without MOSTLY_), longest first so that
# Q4_K_M is not read as Q4_K.
QUANT_NAMES = [
    "F32",
    "F16",
    "BF16",
    "Q4_0",
    "Q4_1",
    "Q5_0",
    "Q5_1",
    "Q8_0",
    "Q2_K",
    "Q2_K_S",
    "Q3_K_S",
    "Q3_K_M",
    "Q3_K_L",
    "Q4_K_S",
    "Q4_K_M",
    "Q5_K_S",
    "Q5_K_M",
    "Q6_K",
    "IQ1_S",
    "IQ1_M",
    "IQ2_XXS",
    "IQ2_XS",
    "IQ2_S",
    "IQ2_M",
    "IQ3_XXS",
    "IQ3_XS",
    "IQ3_S",
    "IQ3_M",
    "IQ4_NL",
    "IQ4_XS",
    "TQ1_0",
    "TQ2_0",
    "MXFP4_MOE",
    "Q1_0",
]
QUANT_RE = re.compile(
    r"(?<![A-Za-z0-9])("
    + "|".join(sorted(QUANT_NAMES, key=len, reverse=True))
    + r")(?![A-Za-z0-9])",
    re.IGNORECASE,
)
# Every pattern here runs in time linear in the line it reads (``tests/manifests/
# test_card_claims_time.py`` feeds each one long runs of digits, spaces and separators): a
# number starts only where no digit or decimal point precedes it and is read atomically, and
# every optional word is preceded by its own possessive run of spaces — never two ``\s*`` that
# could share one run, which made a 3 KB card take 34 s. (Python's ``re`` rather than a
# linear-time engine such as RE2: RE2 has no lookbehind, which the quant names and numbers
# need to start at a word's edge.)
# A number longer than CARD_NUMBER_DIGITS_MAX digits (or with more decimals than
# CARD_DECIMALS_MAX) is not read as a count at all: no model has 10^18 of anything, and a
# float of 400 digits is infinite.
_D, _F = CARD_NUMBER_DIGITS_MAX, CARD_DECIMALS_MAX
_N = (
    rf"(?<![\d.])(?<!\d[,_])(?P<n>(?>\d{{1,3}}(?:[,_]\d{{3}}){{1,{(_D - 1) // 3}}}+(?!\d|[,_]\d)"
    rf"|\d{{1,{_D}}}+(?:\.\d{{1,{_F}}}+)?+(?![\d]|\.\d)))"
)
# The end of an ASCII word where a Korean particle or counter may follow ("32K토큰", "4bit이고",
# "360M개의"): \b would not end it, Hangul being word characters too.
_END = r"(?![A-Za-z0-9_])"
_SCALE = rf"(?:\s*+(?P<s>[KMBT]{_END}|thousand|million|billion|trillion))?"
_BPW_RE = re.compile(
    _N + r"\s*+(?:bpw|(?:real |effective |average )?bits?[ -]per[ -]weight)\b", re.IGNORECASE
)
_BITS_RE = re.compile(r"(?<![\w.])" + _N + rf"[ -]?bits?{_END}(?![ -]per)", re.IGNORECASE)
_CONTEXT_SENTENCE_RE = re.compile(
    _N + rf"(?:\s*+(?P<s>[Kk]{_END}))?(?:[ -]?tokens?)?[ -](?:token[ -])?context\b", re.IGNORECASE
)
_PARAMS_SENTENCE_RE = re.compile(
    _N
    + _SCALE
    + r"(?:\s*+(?:(?P<active>active|activated)|(?P<total>total)))?\s*+(?:parameters?|params)\b",
    re.IGNORECASE,
)
_SIZE_RE = re.compile(rf"(?<![\w.])\d++(?:\.\d++)?+\s*+[MBT]{_END}")
_TP_SENTENCE_RE = re.compile(
    r"\b(?:tp|tp_degree|tensor[ -]parallel(?:ism)?(?: degree)?(?: of)?)"
    rf"\s*+(?:[=:]\s*+)?(?P<n>\d{{1,{_D}}}+){_END}",
    re.IGNORECASE,
)
_SEQ_SENTENCE_RE = re.compile(
    r"\b(?:sequence[ _-]length|seq_len)(?: of)?\s*+(?:[=:]\s*+)?" + _N, re.IGNORECASE
)
# A label starts with a letter, English or Korean; a Korean card may use the full-width colon.
_LABEL_LINE_RE = re.compile(
    r"^\s*+(?:[-*+]\s++)?(?P<label>[A-Za-z가-힣][^:：|]{1,60}?)\s*(?::\s+|：\s*)(?P<v>.+)$"
)
# An org/name (ASCII, as the model-id grammar: "Qwen/Qwen3-8B를" ends before the particle)
# starts at a word's edge, its first part read possessively (it cannot hold the "/" that ends
# it): one attempt per word, not one per character.
_MODEL_ID_RE = re.compile(
    r"(?<![A-Za-z0-9_.-])(?:huggingface\.co/)?"
    r"(?P<id>[A-Za-z0-9][A-Za-z0-9_.-]{0,95}+/[A-Za-z0-9][A-Za-z0-9_.-]{0,95})"
)
_BASE_SENTENCE_RE = re.compile(
    r"\b(?:quanti[sz]ed (?:version )?(?:from|of)|quanti[sz]ations? of|"
    r"GGUF (?:version |quants? |conversion )?of|converted from|compiled from)\b",
    re.IGNORECASE,
)
_LICENSE_SENTENCE_RE = re.compile(
    r"\b(?:licen[sc]ed under|released under|available under)\s++(?:the\s++)?"
    r"(?P<name>[A-Za-z][\w .-]{0,40}?)\s+licen[sc]e\b",
    re.IGNORECASE,
)
# A decimal in a quant table's bits column.
_DECIMAL_RE = re.compile(rf"(?<![\d.])\d{{1,{_D}}}+(?:\.\d{{1,{_F}}}+)?+(?![\d]|\.\d)")
# Markdown: a link (its text and target: neither holds a bracket, so each "[" is tried once),
# emphasis and code marks, a table's rule cell, where a license's name ends.
_LINK_RE = re.compile(r"\[([^\[\]]*+)\]\(([^()\[\]]*+)\)")
_MARKS_RE = re.compile(r"\*\*|__|`")
_RULE_CELL_RE = re.compile(r":?-{3,}+:?")
_SPACES_RE = re.compile(r"\s+")
# What a label says in parentheses ("Context length (tokens)", "파라미터 수 (Parameters)").
# (Starting only where a run of spaces starts: from inside a run, the run would be scanned
# again at every position — quadratic in a hostile label's spaces.)
_LABEL_ASIDE_RE = re.compile(r"(?<!\s)\s*+\([^()]{0,60}+\)")
_HANGUL_RE = re.compile(r"[가-힣]")
_LABELS: dict[str, ClaimKind] = {
    "context length": "context_length",
    "context window": "context_length",
    "context size": "context_length",
    "context": "context_length",
    "max context": "context_length",
    "maximum context length": "context_length",
    "max context length": "context_length",
    "context_length": "context_length",
    "max_position_embeddings": "context_length",
    "sequence length": "sequence_length",
    "max sequence length": "sequence_length",
    "seq_len": "sequence_length",
    "sequence_length": "sequence_length",
    "tensor parallel degree": "tp_degree",
    "tensor parallelism": "tp_degree",
    "tensor parallel": "tp_degree",
    "tp degree": "tp_degree",
    "tp_degree": "tp_degree",
    "batch size": "batch_size",
    "batch_size": "batch_size",
    "number of parameters": "parameters",
    "parameters": "parameters",
    "total parameters": "parameters",
    "params": "parameters",
    "model size": "parameters",
    "active parameters": "active_parameters",
    "activated parameters": "active_parameters",
    "number of activated parameters": "active_parameters",
    "number of active parameters": "active_parameters",
    "quantization": "quantization",
    "quantisation": "quantization",
    "quant": "quantization",
    "quant type": "quantization",
    "quantization type": "quantization",
    "quantization method": "quantization",
    "license": "license",
    "licence": "license",
    "base model": "base_model",
    "original model": "base_model",
    "quantized from": "base_model",
    "compiled from": "base_model",
    **card_korean.KOREAN_LABELS,
}
_COUNTS = {"context_length", "sequence_length", "tp_degree", "batch_size"}
_PARAMS = {"parameters", "active_parameters"}


@dataclass(frozen=True)
class Claim:
    kind: ClaimKind
    value: str | int | float
    line: int  # in the card file, 1-based (0: the front matter as a whole)
    quote: str  # that line, stripped and bounded
    where: Where
    row: tuple[str, ...] = ()  # a quant table row's cells (its file name among them)


Add = Callable[..., None]


def _tokens(n: str, k: str | None) -> int:
    """A token count: "32K" of context is 32,768."""
    return int(number(n)) * (1024 if k else 1)


def read_claims(body: str, first_line: int = 1) -> list[Claim]:
    """The claims of a card's body (``first_line``: the card line the body starts on)."""
    lines = body.split("\n")
    tables = _tables(lines)
    claims: list[Claim] = []
    title_seen = False

    def add(
        kind: ClaimKind, value: str | int | float, i: int, where: Where, row: Sequence[str] = ()
    ) -> None:
        quote = lines[i].strip()[:200]
        claims.append(Claim(kind, value, first_line + i, quote, where, tuple(row)))

    for i, line in enumerate(lines):
        text = _plain(line)
        if not text.strip():
            continue
        if i in tables:
            _table_row(*tables[i], i, add)
            continue
        if line.lstrip().startswith("|"):
            continue  # a table's header or rule
        if line.startswith("# ") and not title_seen:
            title_seen = True
            for q in QUANT_RE.finditer(text):
                add("quantization", q.group(1).upper(), i, "title")
            continue
        label = _LABEL_LINE_RE.match(text)
        if label and _labelled(label.group("label"), label.group("v"), i, add):
            continue
        _sentence(text, i, add)
    return claims


def _plain(line: str) -> str:
    """A line without Markdown emphasis and code marks, links as their text and target."""
    line = _LINK_RE.sub(lambda m: f"{m.group(1)} {m.group(2)}", line)
    return _MARKS_RE.sub("", line).replace("\\", "")


def _tables(lines: list[str]) -> dict[int, tuple[list[str], list[str]]]:
    """line index -> (header cells, cells) for every body row of a Markdown table."""
    rows: dict[int, tuple[list[str], list[str]]] = {}
    header: list[str] | None = None
    for i, line in enumerate(lines):
        stripped = line.strip()
        if not stripped.startswith("|"):
            header = None
            continue
        cells = [c.strip() for c in stripped.strip("|").split("|")]
        if i > 0 and all(_RULE_CELL_RE.fullmatch(c) for c in cells if c):
            header = [c.strip().lower() for c in lines[i - 1].strip().strip("|").split("|")]
        elif header is not None:
            rows[i] = (header, cells)
    return rows


def _labelled(label: str, value: str, i: int, add: Add, where: Where = "label") -> bool:
    """A ``Label: value`` line or spec-table row; True when the label was one this reads."""
    said = _LABEL_ASIDE_RE.sub("", label).strip().strip("*_ ").lower()
    kind = _LABELS.get(_SPACES_RE.sub(" ", said))
    if kind is None:
        return False
    if kind in _COUNTS or kind in _PARAMS:
        # "32K", "32,768 토큰", "3만 2천", "360M", "1.7 billion", "3억 6천만 개"
        count = card_korean.first_amount(value, tokens=kind in _COUNTS)
        if count is not None:
            add(kind, count, i, where)
    elif kind == "quantization":
        for q in QUANT_RE.finditer(value):
            add(kind, q.group(1).upper(), i, where)
    elif kind == "license":
        found = license_id(value)
        if found:
            add(kind, found, i, where)
    elif kind == "base_model":
        m = _MODEL_ID_RE.search(value)
        if m:
            add(kind, m.group("id").rstrip(".),"), i, where)
    return True


def _table_row(header: list[str], cells: list[str], i: int, add: Add) -> None:
    """A quant table's row — a GGUF repo's list of files: a ``.gguf`` file name, its quant
    type, size, bits — or a spec table's (``| Context Length | 32,768 |``)."""
    plain = [_plain(c).strip() for c in cells]
    if not any(".gguf" in c.lower() for c in plain):
        if len(plain) >= 2 and not any("tensor" in h for h in header):
            _labelled(plain[0], plain[1], i, add, "table")
        return
    named = [c.upper() for c in plain if QUANT_RE.fullmatch(c)]
    in_text = [q.group(1).upper() for c in plain for q in QUANT_RE.finditer(c)]
    quant = (named or in_text or [None])[0]
    if quant is None:
        return
    add("quantization", quant, i, "table", plain)
    for h, c in zip(header, plain, strict=False):
        if ("bit" in h or "bpw" in h or "비트" in h) and (m := _DECIMAL_RE.search(c)):
            add("bits_per_weight", float(m.group(0)), i, "table", plain)


def _sentence(text: str, i: int, add: Add) -> None:
    for m in _BPW_RE.finditer(text):
        add("bits_per_weight", number(m.group("n")), i, "sentence")
    for m in _BITS_RE.finditer(text):
        add("bits", number(m.group("n")), i, "sentence")
    for m in _CONTEXT_SENTENCE_RE.finditer(text):
        add("context_length", _tokens(m.group("n"), m.group("s")), i, "sentence")
    for m in _SEQ_SENTENCE_RE.finditer(text):
        add("sequence_length", int(number(m.group("n"))), i, "sentence")
    for m in _TP_SENTENCE_RE.finditer(text):
        add("tp_degree", int(m.group("n")), i, "sentence")
    # "three sizes: 135M, 360M and 1.7B parameters" is a family, not this model: with more
    # than one size on the line, only a count called total or active is a claim.
    korean = _HANGUL_RE.search(text) is not None
    sizes = len(_SIZE_RE.findall(text))
    if korean:
        sizes += len(card_korean.SIZE_RE.findall(text))
    family = sizes > 1
    for m in _PARAMS_SENTENCE_RE.finditer(text):
        if family and not (m.group("active") or m.group("total")):
            continue
        kind = "active_parameters" if m.group("active") else "parameters"
        add(kind, int(number(m.group("n"), m.group("s"))), i, "sentence")
    licensed = _LICENSE_SENTENCE_RE.search(text)
    if licensed and (found := license_id(licensed.group("name"))):
        add("license", found, i, "sentence")
    based = _BASE_SENTENCE_RE.search(text)
    named = _MODEL_ID_RE.search(text, based.end()) if based else None
    if named is None and korean:
        # "Qwen/Qwen3-8B를 양자화한 모델": the model id first, then what was made of it.
        ids = _MODEL_ID_RE.finditer(text)
        named = next((m for m in ids if card_korean.BASE_AFTER_RE.match(text, m.end())), None)
    if named:
        add("base_model", named.group("id").rstrip(".),"), i, "sentence")
    if korean:
        card_korean.read_sentence(text, i, add, family)
