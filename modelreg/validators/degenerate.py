"""Whether a generation is real text — the judge's first question (modelreg.validators.judge).

Degenerate: empty, control characters, raw special tokens, no letters or digits, near-constant
characters, one word repeated, or a short unit looping. "It loaded" proves nothing: SmolLM2 fed
53× too-small embeddings answers "\\n\\nterterterDDDCterter(". Then what damaged weights say: a
wall of line breaks, almost no letters or digits, and word salad (``salad_reason``): words
stuttered, a few words over and over, fragments glued into non-words. Also the small text
helpers the judge reads answers with (clipping for a reason, numbers, unwrapping, a fenced
JSON answer).
"""

from __future__ import annotations

import itertools
import json
import re
import string
import unicodedata
from collections import Counter

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


_NUMERIC = re.compile(r"^[+-]?\d[\d,._ \u00a0\u202f]*$")


_FENCE = re.compile(r"^```[A-Za-z0-9_-]*\s*\n?(.*?)\n?```$", re.DOTALL)


def _clip(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


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


def _json_answer(text: str) -> str:
    text = text.strip()
    fenced = _FENCE.match(text)
    return fenced.group(1).strip() if fenced else text
