"""The judge: what one generation is worth, and what a run is worth against a suite.

The order matters — an answer is only read once the output is known to be real text that ended:

1. **degenerate**: empty, control characters, raw special tokens, no letters or digits,
   near-constant characters, one word repeated, or a short unit looping. "It loaded" proves
   nothing: SmolLM2 fed 53× too-small embeddings answers "\\n\\nterterterDDDCterter(".
   Then what damaged weights say: a wall of line breaks, almost no letters or digits, and
   word salad (``salad_reason``): words stuttered, a few words over and over, fragments glued
   into non-words. Judged before the stop, or the on-call reads "template / stop token" where
   the weights are broken.
2. **stop**: a chat model must end its turn (finish reason ``stop``: an EOS / end-of-turn token)
   within its token budget; an end-of-turn marker written out as text, with generation going
   on, is the same failure (a broken template or EOS id). Class ``no_stop``.
3. **answer**: the case's expectation (see ``ExpectMode``). ``contains`` is word-bounded and
   fails when the answer negates the expected text ("Berlin, not Paris") or also asserts an
   alternative from ``reject``.

Nothing here knows how the text was produced: a runtime child and an HTTP endpoint give the same
``Generation``.

Gates come from two places: the suite's thresholds (quality, and resource gates a suite may
state) and the ``gates:`` of the target the run is on (speed and memory of that target's hosts).
A suite meant for every host, like the default chat suite, states no speed: a loaded laptop is
slower than the server it stands in for, and that is not the artifact's fault. A run on a target
judges a ``SuiteOnTarget`` (same content, same digest), and every ``GateResult`` says where its
gate came from.
"""

from __future__ import annotations

import itertools
import json
import re
import string
import unicodedata
from collections import Counter
from collections.abc import Callable, Mapping, Sequence

from pydantic import Field

from modelreg import units
from modelreg.schemas.suite import (
    AgreementFigures,
    Case,
    CaseResult,
    Classification,
    Expectation,
    ExpectMode,
    FinishReason,
    GateOutcome,
    GateResult,
    GateSource,
    Generation,
    ResourceGates,
    Resources,
    SubsetResult,
    Suite,
    SuiteResult,
    Thresholds,
    Verdict,
)

# Markers that end a turn in the common chat templates (ChatML, Gemma, Llama 3, Phi, Llama 2).
END_OF_TURN_MARKERS = (
    "<|im_end|>",
    "<end_of_turn>",
    "<|eot_id|>",
    "<|end|>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "</s>",
    "<eos>",
)
_SPECIAL_TOKEN = re.compile(
    r"<\|[A-Za-z0-9_.:-]{1,40}\|>|</?s>|<(?:start|end)_of_turn>|<(?:bos|eos|pad|unk|mask)>"
    r"|\[/?INST\]|<</?SYS>>"
)

# Short units (2-4 characters with a letter) repeated 3+ times in a row, one letter 3+ times,
# or a longer unit (a word, a phrase) looping 3+ times. Digits alone never count: 1111111110
# is a fine answer to 123456789 + 987654321.
_SHORT_LOOP = re.compile(r"(.{2,4}?)\1{2,}|([^\W\d_])\2{2,}", re.DOTALL)
_LONG_LOOP = re.compile(r"(.{5,80}?)\1{2,}", re.DOTALL)
# A run of one punctuation character (not a Markdown rule, a dotted leader or a form's blank).
_PUNCT_RUN = re.compile(r"([^\w\s\-=*#~.·—–])\1{7,}")
LOOP_SHARE_DEGENERATE = 0.5
LOOP_MIN_CHARS = 6  # "AAA" may be an answer (a battery size); "aaaaaaa" is not
WHITESPACE_SHARE_DEGENERATE = 0.25  # non-space characters below this share of a long output
# What an answer without letters may be made of: numbers, lists of them, a formula.
_NUMBERS_ONLY = re.compile(r"^[\d\s.,;:+\-*/=()\[\]{}%^<>×÷−]*$")
WORD_SHARE_DEGENERATE = 0.6

_WORD = re.compile(r"\w+")
_CLAUSE_BREAK = re.compile(r"[.;:!?\n,()\[\]—–]")
# Negation cues within the few words before a match, in the same clause.
_NEGATION_BEFORE = re.compile(
    r"\b(?:not|no|never|neither|nor|cannot|isn't|isnt|wasn't|aren't|weren't|don't|doesn't|"
    r"didn't|won't|wouldn't|rather\s+than|instead\s+of|other\s+than|except|unlike|"
    r"excluding|pas|nicht|kein|keine|nunca|jamais)\b|n't\b",
    re.IGNORECASE,
)
_NEGATION_AFTER = re.compile(
    r"^\s*(?:(?:is|was|are|were)\s+(?:not|never|no\s+longer)\b|(?:isn't|wasn't|aren't|"
    r"weren't)\b)",
    re.IGNORECASE,
)
NEGATION_WINDOW_WORDS = 4
_NUMERIC = re.compile(r"^[+-]?\d[\d,._ \u00a0\u202f]*$")
_THOUSANDS = re.compile(r"(?<=\d)[,_ \u00a0\u202f](?=\d{3}(?:\D|$))")
_FENCE = re.compile(r"^```[A-Za-z0-9_-]*\s*\n?(.*?)\n?```$", re.DOTALL)


def _clip(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ---------------------------------------------------------------------------- degenerate


def _is_number(text: str) -> bool:
    return bool(_NUMERIC.match(text.strip()))


def _unwrap(text: str) -> str:
    """``text`` without the quotes, backticks or emphasis wrapped around it."""
    previous = None
    while previous != text:
        previous = text
        text = text.strip().strip("\"'`*_“”‘’«»").strip()
    return text


def loop_share(text: str) -> float:
    """Share of the non-space characters inside short repeated runs (of a unit with a letter,
    or of one punctuation character 8 times or more), or a looping phrase."""
    compact = "".join(text.split())
    if not compact:
        return 1.0
    covered = [False] * len(compact)
    for match in _SHORT_LOOP.finditer(compact):
        unit = match.group(1) or match.group(2)
        if any(ch.isalpha() for ch in unit):
            covered[match.start() : match.end()] = [True] * (match.end() - match.start())
    for match in _PUNCT_RUN.finditer(compact):
        covered[match.start() : match.end()] = [True] * (match.end() - match.start())
    spaced = " ".join(text.split()) + " "  # so that a final copy ends like the others
    looped = sum(
        len("".join(m.group(0).split()))
        for m in _LONG_LOOP.finditer(spaced)
        if any(ch.isalpha() for ch in m.group(1))
    )
    return max(sum(covered), looped) / len(compact)


# ---------------------------------------------------------------------------- word salad

# Damaged weights (an embedding at the wrong scale, corrupted quantization blocks) seldom loop
# as cleanly as the rules above need: they say "_______ the the furtherTheThe further further
# further A", or glue subword fragments into non-words ("pathlibareordial setattrounter"),
# or end in a wall of line breaks. No word list: these rules read the shape of the text, and
# need SALAD_MIN_WORDS words of evidence. Measured on the damaged SmolLM2 and Gemma 3 copies
# of tests/validators/test_broken_weights.py, and on their healthy answers.
SALAD_MIN_WORDS = 6  # fewer words are too little evidence: "Paris", "yes", "1. apples"
SALAD_MIN_LETTERS = 80  # ... unless they are this long: glued fragments make few "words"
NEWLINE_RUN_DEGENERATE = 8  # line breaks in a row, only blanks between them
# Of a longer output, the share of non-space characters that are letters or digits: prose
# ~0.8, code ~0.6, JSON ~0.3. Gemma 3 fed embeddings 1/√hidden too small says
# ', \\々"},{""},{""},{""},{""},{""},{""},{""},{",子,,,, ,,,,,,,,,,,' (2 of 61).
ALNUM_SHARE_DEGENERATE = 0.1
ALNUM_SHARE_MIN_CHARS = 20
STUTTER_MIN = 3  # words that repeat the word just before them ("the the", "TheThe") ...
STUTTER_SHARE_DEGENERATE = 0.2  # ... and their share of the pairs of neighbouring words
TOP_WORDS = 3
TOP_WORDS_MIN = 12  # words (numbers included), before the commonest few are judged
TOP_WORDS_SHARE_DEGENERATE = 0.8  # what the TOP_WORDS commonest words may cover
# Mean letters per word of a cased script (Latin, Cyrillic, Greek), words cut at case humps
# ("ChannelType" is two): English prose runs ~4.5 (9 for a sentence of long technical words),
# code ~4-5, German ~6, Finnish ~7.5; glued fragments 11 to 30.
WORD_LETTERS_DEGENERATE = 11.0
GLUED_WORD_LETTERS = 16  # one lowercase word this long is glued fragments ("pathlibareordial")
NON_WORD_SHARE_DEGENERATE = 0.5  # of the whitespace-separated tokens with a letter or digit
MIXED_SCRIPT_MIN_LETTERS = 6  # "μmol", "kΩ" are units; "interpreayamaя" is not a word
LOOPING_WORD_CHARS = 6  # "hahaha", "terterter" inside one token

_LETTER_RUN = re.compile(r"[^\W\d_]+")
_WORD_OR_NUMBER = re.compile(r"[^\W\d_]+|\d+")
_NEWLINE_RUN = re.compile(rf"(?:[ \t\r]*\n){{{NEWLINE_RUN_DEGENERATE},}}")
_UNDERSCORE_RUN = re.compile(r"_{3,}")
_HEX = re.compile(r"[0-9a-f]+")
_ASCII_ALNUM = re.compile(r"[A-Za-z0-9]+")
# Markup tags are structure, not words: <li>…</li> repeats by design.
_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?/?>")
# URLs, e-mail addresses, hashtags and handles glue words on purpose.
_GLUED_ON_PURPOSE = re.compile(r"://|^www\.|@|^#", re.IGNORECASE)
# Scripts written without spaces between words: a Latin word may sit glued inside them.
_UNSPACED_SCRIPTS = frozenset({"CJK", "HANGUL", "THAI", "LAO", "KHMER", "MYANMAR"})
_ALPHABETS = frozenset(
    {"LATIN", "GREEK", "CYRILLIC", "ARMENIAN", "GEORGIAN", "HEBREW", "ARABIC", "SYRIAC"}
    | {"THAANA", "DEVANAGARI", "BENGALI", "GURMUKHI", "GUJARATI", "ORIYA", "TAMIL", "TELUGU"}
    | {"KANNADA", "MALAYALAM", "SINHALA", "TIBETAN", "ETHIOPIC", "CHEROKEE", "MONGOLIAN"}
    | _UNSPACED_SCRIPTS
)


def _humps(run: str) -> list[tuple[int, int]]:
    """(start, end) of the words in a run of letters, cut where the case says a word starts:
    furtherTheThe → further, The, The; parseHTMLString → parse, HTML, String."""
    cuts = [0]
    for i in range(1, len(run)):
        before, here = run[i - 1], run[i]
        after = run[i + 1] if i + 1 < len(run) else ""
        if (before.islower() and here.isupper()) or (
            before.isupper() and here.isupper() and after.islower()
        ):
            cuts.append(i)
    cuts.append(len(run))
    return list(itertools.pairwise(cuts))


def _words(text: str) -> list[tuple[str, int, int]]:
    """(word, start, end): runs of letters cut at case humps, and runs of digits."""
    words = []
    for match in _WORD_OR_NUMBER.finditer(text):
        run = match.group(0)
        if run[0].isdigit():
            words.append((run, match.start(), match.end()))
            continue
        for start, end in _humps(run):
            words.append((run[start:end], match.start() + start, match.start() + end))
    return words


def _script(ch: str) -> str | None:
    """The script of a letter, from its Unicode name (LATIN, CYRILLIC, …; Chinese and
    Japanese as CJK), or None for letter-like symbols (µ, ː, ℓ, mathematical letters)."""
    first = unicodedata.name(ch, "").split(" ", 1)[0]
    if first.startswith(("CJK", "HIRAGANA", "KATAKANA", "IDEOGRAPHIC", "HALFWIDTH", "FULLWIDTH")):
        return "CJK"
    return first if first in _ALPHABETS else None


def _mixed_scripts(token: str) -> bool:
    """Letters of unrelated scripts in one token: a Latin word glued inside Chinese, Japanese,
    Korean or Thai is ordinary; Latin with Cyrillic or Greek ("ζωMetaInfo") is not."""
    letters = [ch for ch in token if ch.isalpha()]
    if len(letters) < MIXED_SCRIPT_MIN_LETTERS:
        return False
    scripts = {s for s in map(_script, letters) if s is not None}
    spaced = scripts - _UNSPACED_SCRIPTS
    return len(spaced) >= 2 or (bool(scripts & _UNSPACED_SCRIPTS) and bool(spaced - {"LATIN"}))


def _letter_digit_soup(token: str) -> bool:
    """Letters and digits alternating: "x7q2k9z" (not a hash, a formula, a version or a date
    in Chinese or Japanese)."""
    for run in _ASCII_ALNUM.findall(token):
        if not any(ch.islower() for ch in run) or _HEX.fullmatch(run):
            continue
        if sum(a.isdigit() != b.isdigit() for a, b in itertools.pairwise(run)) >= 4:
            return True
    return False


def _non_word(token: str) -> str | None:
    """What makes a whitespace-separated token no word, or None when it may be one."""
    if _UNDERSCORE_RUN.fullmatch(token.strip(string.punctuation.replace("_", ""))):
        return "underscore runs"
    if _mixed_scripts(token):
        return "mixed scripts"
    if any(unicodedata.category(ch) == "Lm" and _script(ch) is None for ch in token):
        return "modifier letters (ː, ʰ) inside"
    for run in _LETTER_RUN.findall(token):
        humps = [run[start:end] for start, end in _humps(run)]
        if any(a.casefold() == b.casefold() for a, b in itertools.pairwise(humps)):
            return "words glued to themselves"
        loop = _SHORT_LOOP.search(run) or _LONG_LOOP.search(run)
        if loop and len(loop.group(0)) >= LOOPING_WORD_CHARS:
            return "looping fragments"
        glued = any(len(h) >= GLUED_WORD_LETTERS and h[0].islower() for h in humps)
        if glued and not _GLUED_ON_PURPOSE.search(token):
            return "glued fragments"
    if _letter_digit_soup(token):
        return "letter-digit soup"
    return None


def _is_json(text: str) -> bool:
    try:
        json.loads(_json_answer(text))
    except json.JSONDecodeError:
        return False
    return True


def _salad(what: str, text: str) -> str:
    return f"degenerate output (broken weights?): {what}: {_clip(text, 48)!r}"


def _stutter(text: str, words: list[tuple[str, int, int]]) -> str | None:
    """Words that repeat the word just before them, nothing but blanks between ("the the",
    "TheThe"): rare in prose ("had had"), in code an operator stands between ("x * x")."""
    pairs = list(itertools.pairwise(words))
    if len(words) < SALAD_MIN_WORDS:
        return None
    stutters = sum(
        a.casefold() == b.casefold() and not text[a_end:b_start].strip()
        for (a, _, a_end), (b, b_start, _) in pairs
    )
    if stutters >= STUTTER_MIN and stutters / len(pairs) >= STUTTER_SHARE_DEGENERATE:
        return f"{stutters} of {len(words)} words repeat the word before them"
    return None


def _few_words(words: list[tuple[str, int, int]]) -> str | None:
    """A few words (numbers included: an if/elif ladder over 0, 1, 2… is not salad) making up
    nearly all of the output."""
    if len(words) < TOP_WORDS_MIN:
        return None
    top = Counter(w.casefold() for w, _, _ in words).most_common(TOP_WORDS)
    covered = sum(n for _, n in top)
    if covered / len(words) < TOP_WORDS_SHARE_DEGENERATE:
        return None
    names = ", ".join(repr(w) for w, _ in top)
    return f"{covered} of {len(words)} words are the same {len(top)} ({names})"


def _glued(tokens: list[str]) -> str | None:
    """Words far longer than any language's average: subword fragments glued together."""
    cased = [
        run[start:end]
        for token in tokens
        if not _GLUED_ON_PURPOSE.search(token)
        for run in _LETTER_RUN.findall(token)
        for start, end in _humps(run)
        if run[start].islower() or run[start].isupper()
    ]
    letters = sum(map(len, cased))
    if len(cased) < SALAD_MIN_WORDS and letters < SALAD_MIN_LETTERS:
        return None
    mean = letters / len(cased)
    if mean < WORD_LETTERS_DEGENERATE:
        return None
    return f"words of {mean:.1f} letters on average ({_clip(max(cased, key=len), 24)!r})"


def _non_words(tokens: list[str]) -> str | None:
    kinds = Counter(kind for kind in map(_non_word, tokens) if kind is not None)
    count = sum(kinds.values())
    if not tokens or count / len(tokens) < NON_WORD_SHARE_DEGENERATE:
        return None
    seen = ", ".join(kind for kind, _ in kinds.most_common())
    return f"{count} of {len(tokens)} tokens are no words ({seen})"


def newline_run(text: str) -> int:
    """The most line breaks in a row in ``text`` (blanks between them allowed)."""
    return max((m.group(0).count("\n") for m in _NEWLINE_RUN.finditer(text)), default=0)


def salad_reason(text: str) -> str | None:
    """Why ``text`` reads as word salad (thresholds above), or None. Judged only on enough
    evidence: SALAD_MIN_WORDS words, or SALAD_MIN_LETTERS letters; never on JSON."""
    if _is_json(text):
        return None  # data, not prose: repeated keys and values are its shape
    text = _TAG.sub(" ", text)
    words = _words(text)
    lettered = [w for w in words if not w[0][0].isdigit()]
    if len(lettered) < SALAD_MIN_WORDS and sum(len(w) for w, _, _ in lettered) < SALAD_MIN_LETTERS:
        return None
    tokens = [t for t in text.split() if any(ch.isalnum() or ch == "_" for ch in t)]
    # Single letters are no evidence of repetition: "(* x x)", "a[i][j] = b[i][j]".
    longer = [w for w in words if len(w[0]) > 1 or w[0].isdigit()]
    seen = (
        _stutter(text, [w for w in longer if not w[0][0].isdigit()])
        or _few_words(longer)
        or _glued(tokens)
        or _non_words(tokens)
    )
    return None if seen is None else _salad(seen, text)


def degenerate_reason(text: str) -> str | None:
    """Why ``text`` is not real output, or None when it is."""
    stripped = text.strip()
    if not stripped:
        return "empty output" if not text else "whitespace only"
    controls = [ch for ch in stripped if unicodedata.category(ch) == "Cc" and ch not in "\t\n\r"]
    if controls:
        return f"control character U+{ord(controls[0]):04X} in the output"
    if stripped.count("\ufffd") > 1:
        return "undecodable bytes (U+FFFD) in the output"
    special = _SPECIAL_TOKEN.search(stripped)
    if special:
        return f"raw special token {special.group(0)!r} in the output"
    if not any(ch.isalnum() for ch in stripped):
        return "no letters or digits"
    if len(text) >= 16 and len("".join(text.split())) / len(text) < WHITESPACE_SHARE_DEGENERATE:
        return "mostly whitespace"
    if not any(ch.isalpha() for ch in stripped) and not _NUMBERS_ONLY.match(_unwrap(stripped)):
        return "no letters, and not a number or a formula"
    compact = "".join(stripped.split())
    if len(compact) >= 8 and len(set(compact)) <= 3 and not _is_number(stripped):
        return f"near-constant output ({len(set(compact))} distinct characters)"
    words = [w for w in _WORD.findall(stripped.casefold()) if len(w) >= 2]
    if len(words) >= 4:
        word, count = Counter(words).most_common(1)[0]
        if count / len(words) >= WORD_SHARE_DEGENERATE:
            return f"{word!r} is {count} of {len(words)} words"
    share = loop_share(stripped) if len(compact) >= LOOP_MIN_CHARS else 0.0
    if share >= LOOP_SHARE_DEGENERATE:
        return f"repetition covers {share:.0%} of the output"
    wall = newline_run(text)
    if wall:
        return f"{wall} line breaks in a row: the same token over and over"
    alnum = sum(ch.isalnum() for ch in compact)
    if len(compact) >= ALNUM_SHARE_MIN_CHARS and alnum / len(compact) < ALNUM_SHARE_DEGENERATE:
        return f"only {alnum} of {len(compact)} characters are letters or digits"
    return salad_reason(text)


# ---------------------------------------------------------------------------- stop


def _split_turn(text: str) -> tuple[str, str | None]:
    """The text up to the first end-of-turn marker written as text, and that marker."""
    first: tuple[int, str] | None = None
    for marker in END_OF_TURN_MARKERS:
        at = text.find(marker)
        if at >= 0 and (first is None or at < first[0]):
            first = (at, marker)
    if first is None:
        return text, None
    return text[: first[0]], first[1]


def stop_reason(generation: Generation, marker: str | None) -> str | None:
    """Why the generation did not end its turn properly, or None when it did."""
    if marker is not None:
        return f"the end-of-turn marker {marker!r} came out as text and generation went on"
    if not generation.chat:
        return None  # a plain completion may run to its budget
    if generation.finish_reason is FinishReason.STOP:
        return None
    if generation.finish_reason is FinishReason.LENGTH:
        budget = generation.max_tokens or generation.completion_tokens
        return f"no end of turn within {budget} tokens"
    return "the runtime did not report why generation ended, so the end of turn is unproven"


# ---------------------------------------------------------------------------- answer


def _fold(text: str, expect: Expectation) -> str:
    return text if expect.case_sensitive else text.casefold()


def _bounded(ch: str) -> bool:
    """Whether a term edge at ``ch`` needs a word boundary: a word character of a script that
    separates words with spaces (not Chinese or Japanese, where 東京 sits inside 首都は東京です)."""
    return bool(re.match(r"\w", ch)) and unicodedata.east_asian_width(ch) not in ("W", "F")


def _pattern(term: str, expect: Expectation) -> re.Pattern[str]:
    """Word-bounded where the term starts or ends with a word character."""
    body = re.escape(_fold(term, expect))
    start = r"(?<!\w)" if _bounded(term[0]) else ""
    end = r"(?!\w)" if _bounded(term[-1]) else ""
    if _is_number(term):
        start, end = r"(?<![\w.,])", r"(?!\w|[.,]\d)"
    return re.compile(start + body + end)


def _normalise_numbers(text: str) -> str:
    return _THOUSANDS.sub("", text)


def _negated(text: str, start: int, end: int) -> bool:
    before = _CLAUSE_BREAK.split(text[:start])[-1]
    window = " ".join(before.split()[-NEGATION_WINDOW_WORDS:])
    if _NEGATION_BEFORE.search(window):
        return True
    after = _CLAUSE_BREAK.split(text[end:])[0]
    return bool(_NEGATION_AFTER.match(after))


def _occurrences(text: str, term: str, expect: Expectation) -> tuple[int, int]:
    """(asserted, negated) word-bounded occurrences of ``term`` in ``text``."""
    haystack = _fold(text, expect)
    if _is_number(term):
        haystack, term = _normalise_numbers(haystack), _normalise_numbers(term)
    asserted = negated = 0
    for match in _pattern(term, expect).finditer(haystack):
        if _negated(haystack, match.start(), match.end()):
            negated += 1
        else:
            asserted += 1
    return asserted, negated


def _rejected(text: str, expect: Expectation) -> str | None:
    for alternative in expect.reject:
        asserted, _ = _occurrences(text, alternative, expect)
        if asserted:
            return alternative
    return None


def _normalise_whole(text: str, expect: Expectation) -> str:
    """The whole answer as ``exact`` / ``one_of`` compare it: trimmed, unquoted, no final
    period, whitespace collapsed, case-folded unless the case is case-sensitive."""
    text = " ".join(text.split())
    previous = None
    while previous != text:
        previous = text
        text = _unwrap(text).rstrip(".!。")
    return _fold(text, expect)


def _json_answer(text: str) -> str:
    text = text.strip()
    fenced = _FENCE.match(text)
    return fenced.group(1).strip() if fenced else text


def answer_reason(output: str, expect: Expectation) -> str | None:
    """Why ``output`` does not meet ``expect``, or None when it does."""
    mode = expect.mode
    if mode is ExpectMode.CONTAINS:
        assert expect.value is not None
        asserted, negated = _occurrences(output, expect.value, expect)
        if negated:
            return f"negates {expect.value!r}"
        if not asserted:
            return f"does not contain {expect.value!r}"
    elif mode is ExpectMode.NOT_CONTAINS:
        assert expect.value is not None
        asserted, negated = _occurrences(output, expect.value, expect)
        if asserted or negated:
            return f"contains {expect.value!r}"
    elif mode is ExpectMode.EXACT:
        assert expect.value is not None
        if _normalise_whole(output, expect) != _normalise_whole(expect.value, expect):
            return f"is not exactly {expect.value!r}"
    elif mode is ExpectMode.ONE_OF:
        answer = _normalise_whole(output, expect)
        if answer not in {_normalise_whole(v, expect) for v in expect.values}:
            return "is not " + expect.describe()
    elif mode is ExpectMode.REGEX:
        assert expect.value is not None
        flags = 0 if expect.case_sensitive else re.IGNORECASE
        if not re.search(expect.value, output, flags):
            return f"does not match /{expect.value}/"
    elif mode is ExpectMode.JSON:
        return _json_reason(output, expect)
    alternative = _rejected(output, expect)
    if alternative is not None:
        return f"also asserts {alternative!r}"
    return None


def _json_reason(output: str, expect: Expectation) -> str | None:
    try:
        document = json.loads(_json_answer(output))
    except json.JSONDecodeError as exc:
        return f"is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
    if expect.json_schema is None:
        return None
    import jsonschema

    validator_class = jsonschema.validators.validator_for(expect.json_schema)
    error = jsonschema.exceptions.best_match(
        validator_class(expect.json_schema).iter_errors(document)
    )
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "(root)"
    return f"JSON does not match its schema at {where}: {_clip(error.message, 120)}"


# ---------------------------------------------------------------------------- the judge


def judge(generation: Generation, expect: Expectation) -> Verdict:
    """Classify one generation: degenerate, then stop, then answer."""
    output = generation.output
    turn, marker = _split_turn(output)
    degenerate = degenerate_reason(turn)
    if degenerate is not None:
        return Verdict(classification=Classification.DEGENERATE, reason=degenerate)
    no_stop = stop_reason(generation, marker)
    if no_stop is not None:
        return Verdict(classification=Classification.NO_STOP, reason=no_stop)
    wrong = answer_reason(turn, expect)
    if wrong is not None:
        return Verdict(
            classification=Classification.WRONG_ANSWER, reason=f"{_clip(turn)!r} {wrong}"
        )
    return Verdict(classification=Classification.PASS, reason=f"{_clip(turn)!r}")


# ---------------------------------------------------------------------------- a suite run

SAME_OUTPUT_MIN_CASES = 3


def _same_output_everywhere(generations: Sequence[Generation]) -> bool:
    """A model that answers every prompt alike is not reading the prompts."""
    if len(generations) < SAME_OUTPUT_MIN_CASES:
        return False
    outputs = {" ".join(g.output.split()).casefold() for g in generations}
    return len(outputs) == 1


def judge_cases(suite: Suite, generations: Mapping[str, Generation]) -> list[CaseResult]:
    """Each case judged on its generation (``generations`` keyed by case id)."""
    present = [generations[c.id] for c in suite.cases if c.id in generations]
    same_everywhere = _same_output_everywhere(present)
    results = []
    for case in suite.cases:
        generation = generations.get(case.id)
        if generation is None:
            verdict = Verdict(classification=Classification.NOT_RUN, reason="no output")
        elif same_everywhere:
            verdict = Verdict(
                classification=Classification.DEGENERATE,
                reason=f"the same output for every prompt: {_clip(generation.output)!r}",
            )
        else:
            verdict = judge(generation, case.expect)
        results.append(case_result(case, generation, verdict))
    return results


def case_result(case: Case, generation: Generation | None, verdict: Verdict) -> CaseResult:
    return CaseResult(
        case_id=case.id,
        subset=case.subset,
        prompt=case.prompt,
        chat=case.chat,
        max_tokens=case.max_tokens,
        expect=case.expect,
        output=generation.output if generation is not None else None,
        finish_reason=generation.finish_reason if generation is not None else None,
        stopped_by_eos=generation.stopped_by_eos if generation is not None else None,
        completion_tokens=generation.completion_tokens if generation is not None else None,
        classification=verdict.classification,
        reason=verdict.reason,
    )


def _rate(passed: int, total: int) -> float:
    return passed / total if total else 0.0


def _gate(
    name: str,
    measured: float | None,
    limit: float,
    upper: bool,
    show: Callable[..., str] = units.number,
    *,
    target: str | None = None,
) -> GateResult:
    """``upper``: the measurement must not exceed ``limit``; otherwise it must reach it.
    ``target``: the gate is that target's (``gates:``), not the suite's."""
    label = f"{name} of target {target}" if target is not None else name
    source = GateSource.TARGET if target is not None else GateSource.SUITE
    if measured is None:
        return GateResult(
            gate=name,
            outcome=GateOutcome.UNMEASURED,
            measured=None,
            limit=limit,
            message=f"{label}: not measured (limit {show(limit)})",
            source=source,
            target=target,
        )
    ok = measured <= limit if upper else measured >= limit
    relation = ("≤" if ok else ">") if upper else ("≥" if ok else "<")
    shown = show(measured)
    if shown == show(limit) and measured != limit:
        shown = show(measured, digits=6)  # not "2 tok/s < 2 tok/s" for 1.995
    return GateResult(
        gate=name,
        outcome=GateOutcome.PASS if ok else GateOutcome.FAIL,
        measured=measured,
        limit=limit,
        message=f"{label}: {shown} {relation} {show(limit)}",
        source=source,
        target=target,
    )


def _resource_gates(
    limits: ResourceGates | Thresholds, r: Resources, target: str | None
) -> list[GateResult]:
    # (gate, measured, limit, a maximum?, how its figures print), in the order reported.
    table = (
        ("max_peak_rss_gib", r.peak_rss_gib, limits.max_peak_rss_gib, True, units.gib),
        (
            "min_decode_tokens_per_s",
            r.decode_tokens_per_s,
            limits.min_decode_tokens_per_s,
            False,
            units.rate,
        ),
        (
            "min_prompt_tokens_per_s",
            r.prompt_tokens_per_s,
            limits.min_prompt_tokens_per_s,
            False,
            units.rate,
        ),
        ("max_ttft_ms", r.ttft_ms_max, limits.max_ttft_ms, True, units.duration_ms),
        ("max_ttft_ms_p50", r.ttft_ms_median, limits.max_ttft_ms_p50, True, units.duration_ms),
        ("max_ttft_ms_p95", r.ttft_ms_p95, limits.max_ttft_ms_p95, True, units.duration_ms),
    )
    return [
        _gate(name, measured, limit, is_max, show, target=target)
        for name, measured, limit, is_max, show in table
        if limit is not None
    ]


class SuiteOnTarget(Suite):
    """A suite as it runs on one target: the suite's content (the same digest: the target's
    gates are part of the target's definition, fingerprinted there) and the resource gates
    that target adds on top of the suite's."""

    target_name: str | None = Field(default=None, exclude=True)
    target_gates: ResourceGates | None = Field(default=None, exclude=True)


def suite_on_target(suite: Suite, target_name: str, gates: ResourceGates | None) -> Suite:
    """``suite`` with the gates of ``target_name`` (the suite itself when it declares none)."""
    if gates is None or not gates.declared:
        return suite
    content = {name: getattr(suite, name) for name in Suite.model_fields}
    return SuiteOnTarget.model_construct(**content, target_name=target_name, target_gates=gates)


def resource_gates(suite: Suite, resources: Resources | None) -> list[GateResult]:
    """The suite's resource gates, then those of the target it runs on."""
    r = resources or Resources()
    gates = _resource_gates(suite.thresholds, r, None)
    if isinstance(suite, SuiteOnTarget) and suite.target_gates is not None:
        gates += _resource_gates(suite.target_gates, r, suite.target_name or "?")
    return gates


def agreement_gates(suite: Suite, agreement: AgreementFigures | None) -> list[GateResult]:
    """Gates on agreement with a reference; ``skipped`` when no reference was compared."""
    t = suite.thresholds
    wanted = [
        ("min_top1_agreement", t.min_top1_agreement, False),
        ("max_mean_kl", t.max_mean_kl, True),
    ]
    gates = []
    for name, limit, upper in wanted:
        if limit is None:
            continue
        if agreement is None:
            gates.append(
                GateResult(
                    gate=name,
                    outcome=GateOutcome.SKIPPED,
                    measured=None,
                    limit=limit,
                    message=f"{name}: no reference compared in this run",
                )
            )
            continue
        measured = agreement.top1_agreement if name == "min_top1_agreement" else agreement.mean_kl
        gates.append(_gate(name, measured, limit, upper))
    return gates


def evaluate_suite(
    suite: Suite,
    generations: Mapping[str, Generation],
    resources: Resources | None = None,
    agreement: AgreementFigures | None = None,
) -> SuiteResult:
    """Judge a run against ``suite``: every case, the pass rates overall and per subset, the
    resource gates (the suite's, and a ``SuiteOnTarget``'s target's) and the agreement gates.
    It passes only when every gate passes (or was skipped)."""
    cases = judge_cases(suite, generations)
    passed = sum(c.passed for c in cases)
    pass_rate = _rate(passed, len(cases))
    reasons = []
    if pass_rate < suite.thresholds.min_pass_rate:
        reasons.append(
            f"pass rate {passed}/{len(cases)} = {pass_rate:.0%} < "
            f"min_pass_rate {suite.thresholds.min_pass_rate:.0%}"
        )
    subsets = []
    for subset in sorted({c.subset for c in cases}):
        members = [c for c in cases if c.subset == subset]
        ok_count = sum(c.passed for c in members)
        rate = _rate(ok_count, len(members))
        minimum = suite.thresholds.subsets.get(subset)
        ok = minimum is None or rate >= minimum
        if not ok:
            reasons.append(
                f"subset {subset}: {ok_count}/{len(members)} = {rate:.0%} < {minimum:.0%}"
            )
        subsets.append(
            SubsetResult(
                subset=subset,
                passed=ok_count,
                total=len(members),
                pass_rate=rate,
                min_pass_rate=minimum,
                ok=ok,
            )
        )
    gates = resource_gates(suite, resources) + agreement_gates(suite, agreement)
    reasons += [g.message for g in gates if g.outcome in (GateOutcome.FAIL, GateOutcome.UNMEASURED)]
    return SuiteResult(
        suite_name=suite.name,
        suite_digest=suite.digest(),
        passed=not reasons,
        pass_rate=pass_rate,
        min_pass_rate=suite.thresholds.min_pass_rate,
        cases=cases,
        subsets=subsets,
        gates=gates,
        resources=resources,
        agreement=agreement,
        reasons=reasons,
    )


def baseline_gates(
    suite: Suite,
    result: SuiteResult,
    baseline: SuiteResult | None,
    baseline_id: str | None,
    problem: str | None,
) -> list[GateResult]:
    """The suite's pass-rate drops relative to its baseline record (``max_pass_rate_drop_vs``):
    ``baseline`` is that record's own counting run's result on this suite version (None:
    there is none, ``problem`` says why — unmeasured, never a pass; None without a problem:
    the record judged is the baseline itself, which drops nothing from itself)."""
    t = suite.thresholds
    wanted: list[tuple[str, str | None, float | None]] = [
        ("max_pass_rate_drop", None, t.max_pass_rate_drop)
    ] + [
        (f"max_pass_rate_drop[{subset}]", subset, drop)
        for subset, drop in sorted(t.max_subset_pass_rate_drop.items())
    ]

    def rate(of: SuiteResult, subset: str | None) -> float | None:
        if subset is None:
            return of.pass_rate
        return next((s.pass_rate for s in of.subsets if s.subset == subset), None)

    gates = []
    for name, subset, limit in wanted:
        if limit is None:
            continue

        def gate(
            outcome: GateOutcome,
            measured: float | None,
            said: str,
            name: str = name,
            limit: float = limit,
        ) -> GateResult:
            return GateResult(
                gate=name,
                outcome=outcome,
                measured=measured,
                limit=limit,
                message=f"{name}: {said}",
                source=GateSource.BASELINE,
            )

        now = rate(result, subset)
        if baseline is None and problem is None:
            gates.append(
                gate(GateOutcome.PASS, 0.0, f"{baseline_id} is production, its own baseline")
            )
            continue
        base = rate(baseline, subset) if baseline is not None else None
        if base is None or now is None:
            why = problem or f"{baseline_id} has no result for subset {subset}"
            gates.append(gate(GateOutcome.UNMEASURED, None, f"no baseline ({why})"))
            continue
        drop = max(0.0, base - now)
        ok = drop <= limit + 1e-9
        gates.append(
            gate(
                GateOutcome.PASS if ok else GateOutcome.FAIL,
                round(drop, 6),
                f"{now:.1%} vs {base:.1%} for production {baseline_id}, a drop of "
                f"{drop * 100:.1f} pp {'≤' if ok else '>'} {limit * 100:.1f} pp",
            )
        )
    return gates


def with_gates(result: SuiteResult, gates: list[GateResult]) -> SuiteResult:
    """``result`` with more gates judged: failing or unmeasured ones fail it."""
    failing = [g.message for g in gates if g.outcome in (GateOutcome.FAIL, GateOutcome.UNMEASURED)]
    return result.model_copy(
        update={
            "gates": [*result.gates, *gates],
            "reasons": [*result.reasons, *failing],
            "passed": result.passed and not failing,
        }
    )
