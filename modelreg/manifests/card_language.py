"""Which language a model card's prose is written in — enough to know whether the claim
readers (English in ``card_claims``, Korean in ``card_korean``) can read it.

A card the readers cannot read gives no claims, and "no claims" must not read as "no
findings": ``validators.card`` says "claims not checked: language …" instead. The test is
deliberately simple and deterministic (a finding quotes it): the share of each script among
the prose's letters, then, for Latin script, which language's commonest words it uses most.
A statistical identifier (langdetect, lingua) would name more languages, but it is large,
langdetect is not deterministic, and the question here is only "English, Korean or neither".
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

# Script -> (language code, name) of a card written in it; Latin is decided by its words.
_SCRIPTS = {
    "hangul": (re.compile(r"[가-힣ᄀ-ᇿㄱ-ㆎ]"), "ko", "Korean"),
    "kana": (re.compile(r"[\u3040-\u30ff]"), "ja", "Japanese"),
    "han": (re.compile(r"[\u4e00-\u9fff]"), "zh", "Chinese"),
    "cyrillic": (re.compile(r"[\u0400-\u04ff]"), "ru", "Cyrillic-script (e.g. Russian)"),
    "arabic": (re.compile(r"[\u0600-\u06ff]"), "ar", "Arabic-script"),
    "hebrew": (re.compile(r"[\u0590-\u05ff]"), "he", "Hebrew"),
    "thai": (re.compile(r"[\u0e00-\u0e7f]"), "th", "Thai"),
    "devanagari": (re.compile(r"[\u0900-\u097f]"), "hi", "Devanagari-script (e.g. Hindi)"),
    "greek": (re.compile(r"[\u0370-\u03ff]"), "el", "Greek"),
}
_LATIN_RE = re.compile(r"[A-Za-z\u00c0-\u024f]")
# Function words only one of these languages uses often (those two share — "de", "en", "a",
# "la" — are left out).
_WORDS = {
    "en": ("English", "the and of to is in for with this that on are by it be from was"),
    "fr": ("French", "le les des est et du une pour dans avec ce sur sont au pas ou"),
    "de": ("German", "der die das und ist mit für ein eine von den auf nicht im zu dem"),
    "es": ("Spanish", "el los las y es con para una por del al lo como más pero"),
    "pt": ("Portuguese", "os é com uma um do da não ao mais também são"),
    "it": ("Italian", "il gli di che è per della delle dei nel sono anche questo"),
    "nl": ("Dutch", "het een van en is met voor op niet zijn dit"),
}
_STOPWORDS = {code: frozenset(words.split()) for code, (_, words) in _WORDS.items()}
_WORD_RE = re.compile(r"[a-z\u00e0-\u00ff]{1,20}+")
_FENCE_RE = re.compile(r"^\s*(?:```|~~~)")
_URL_RE = re.compile(r"\bhttps?://\S{1,2000}+")
# Below this many letters (or function words) the prose says too little to tell.
MIN_LETTERS = 20
MIN_WORDS = 5
READABLE = frozenset({"en", "ko"})


@dataclass(frozen=True)
class CardLanguage:
    code: str  # ISO 639-1, or "und" when the prose says too little to tell
    name: str
    evidence: str  # what decided it, for the finding

    @property
    def readable(self) -> bool:
        """Can the claim readers read it? (Too little prose to tell counts as readable: there
        is nothing in it to miss.)"""
        return self.code in READABLE or self.code == "und"


def _prose(body: str) -> str:
    """The card's prose: without code blocks and URLs."""
    kept, fenced = [], False
    for line in body.split("\n"):
        if _FENCE_RE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            kept.append(_URL_RE.sub(" ", line))
    return "\n".join(kept)


def card_language(body: str) -> CardLanguage:
    """The language of a card body's prose (Korean cards mix in English terms: a tenth of the
    letters in Hangul makes a card Korean)."""
    text = _prose(body)
    counts = {script: len(pattern.findall(text)) for script, (pattern, _, _) in _SCRIPTS.items()}
    latin = len(_LATIN_RE.findall(text))
    letters = latin + sum(counts.values())
    if letters < MIN_LETTERS:
        return CardLanguage("und", "undetermined", f"{letters} letters of prose")
    if counts["hangul"] >= letters / 10:
        return CardLanguage("ko", "Korean", f"{counts['hangul']} of {letters} letters Hangul")
    script, most = max(counts.items(), key=lambda item: item[1])
    if most > latin:
        if script == "han" and counts["kana"]:
            script = "kana"  # Japanese writes with kanji and kana alike
        _, code, name = _SCRIPTS[script]
        share = (counts[script] if script != "kana" else counts["kana"] + counts["han"]) / letters
        return CardLanguage(code, name, f"{share:.0%} of its letters in {name} script")
    words = Counter(_WORD_RE.findall(text.lower()))
    hits = {code: sum(words[w] for w in stop) for code, stop in _STOPWORDS.items()}
    code, best = max(hits.items(), key=lambda item: item[1])
    if best < MIN_WORDS or hits["en"] >= best:
        return CardLanguage("en", "English", f"{hits['en']} English function words")
    name = _WORDS[code][0]
    return CardLanguage(
        code, name, f"{best} {name} function words against {hits['en']} English ones"
    )
