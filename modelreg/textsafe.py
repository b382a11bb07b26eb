"""Text that came from outside, made safe to show: output that cannot lie.

Names, licenses, paths, target names and flags come from artifacts, cards, target files and
the command line, and a registry is read during incidents by people who must trust each line.
So before such a string reaches

- a terminal (``for_terminal``): control characters, escape sequences, bidi overrides and
  other invisible or format characters are shown escaped (``\\x1b``, ``\\u202e``, ``\\n``),
  so a value cannot recolour the screen, move the cursor, reorder what follows, or start a
  new line that looks like another record;
- Markdown (``for_markdown``) or HTML (``for_html``): the characters that make structure are
  escaped, so a license cannot add a table row, a heading, raw HTML, a link or a comment.

``confusable_warning`` says why an identifier that looks valid is not (look-alike letters from
another script, invisible characters).
"""

from __future__ import annotations

import html
import re
import unicodedata

_NAMED_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escaped(ch: str) -> str:
    named = _NAMED_ESCAPES.get(ch)
    if named:
        return named
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def for_terminal(text: str) -> str:
    """``text`` with every character a terminal would not show as itself escaped.

    Escaped: C0 and C1 controls (ESC, so no ANSI CSI/OSC sequence survives; CR, LF, TAB),
    DEL, Unicode format characters (bidi overrides and isolates such as U+202E, zero-width
    characters, the BOM), line and paragraph separators, spaces other than U+0020 (they pass
    for a space), lone surrogates (undecodable file names) and private-use or unassigned code
    points — exactly the characters ``str.isprintable`` rejects. The result is one line.
    Backslashes are left alone, so the escapes are for reading, not for round-tripping.
    """
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else _escaped(ch) for ch in text)


# Backslash-escapable ASCII punctuation (CommonMark) that can start structure in a line:
# code spans, emphasis, strikethrough, links and images, table cells, headings.
_MARKDOWN_BACKSLASHED = frozenset("\\`*_~[]|#")
_MARKDOWN_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
# Text that starts a block (list item, setext underline, ordered list) if it begins a line.
_MARKDOWN_BLOCK_START = re.compile(r"[-+=]|\d{1,9}[.)](?=\s|$)")
# GFM turns bare URLs and www. names into links ("autolink literals"); an escaped character
# inside the trigger stops that without changing what the text says.
_MARKDOWN_AUTOLINK = re.compile(r"(?i)(?<=[a-z0-9])(:)(?=//)|(?<=www)(\.)|(@)")


def for_markdown(text: str) -> str:
    """``text`` as inline Markdown (a table cell, a paragraph) that renders as itself.

    Escaped: ``\\ ` * _ ~ [ ] | #`` with a backslash, ``& < >`` as entities (no raw HTML, no
    ``<!-- comment``, no ``<autolink>``), the ``:`` of ``://``, the ``.`` of ``www.`` and
    ``@`` (no GFM autolink), a list or heading marker at the start, and every character
    ``for_terminal`` escapes (no newline can end the row). Not for use inside a code span:
    backslash escapes are literal there.
    """
    out: list[str] = []
    for ch in text:
        if ch in _MARKDOWN_BACKSLASHED:
            out.append("\\" + ch)
        elif ch in _MARKDOWN_ENTITIES:
            out.append(_MARKDOWN_ENTITIES[ch])
        elif not ch.isprintable():
            # The escape's own backslash is escaped, so it renders as written.
            out.append("\\" + _escaped(ch))
        else:
            out.append(ch)
    escaped = "".join(out)
    escaped = _MARKDOWN_AUTOLINK.sub(lambda m: "\\" + m.group(0), escaped)
    start = _MARKDOWN_BLOCK_START.match(escaped)
    if start:
        end = start.end()
        escaped = escaped[: end - 1] + "\\" + escaped[end - 1 :]
    return escaped


def for_json(text: str) -> str:
    """JSON text with every character a terminal would not show as itself (C1 controls, bidi
    overrides, zero-width and other format characters…) written as a ``\\uXXXX`` escape: the
    same JSON value, but one that cannot reorder or recolour a terminal that prints it raw.
    (JSON already escapes C0 controls; valid JSON only has such characters inside strings.)"""
    if text.isascii():
        return text
    out: list[str] = []
    for ch in text:
        if ch.isprintable() or ch in "\n\r\t":
            out.append(ch)
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            high, low = divmod(ord(ch) - 0x10000, 0x400)
            out.append(f"\\u{0xD800 + high:04x}\\u{0xDC00 + low:04x}")
    return "".join(out)


def for_html(text: str) -> str:
    """``text`` as HTML character data or a quoted attribute value that renders as itself:
    ``& < > " '`` as entities and every character ``for_terminal`` escapes shown escaped
    (no bidi override can reorder the page)."""
    return html.escape(for_terminal(text), quote=True)


# Characters that pass for ASCII in most fonts. Not the whole Unicode confusables table
# (TR39): the letters of the scripts most used to spoof Latin names, and the dashes, slashes
# and dots that pass for an id's punctuation. NFKC covers fullwidth and mathematical forms.
_LOOKALIKES = {
    **dict(zip("аеорсухѕіјԁԛԝһӏү", "aeopcyxsijdqwhly", strict=True)),  # Cyrillic
    **dict(zip("АВЕКМНОРСТХЅІЈҮԚԜ", "ABEKMHOPCTXSIJYQW", strict=True)),  # Cyrillic
    **dict(zip("αοριυνκχ", "aopiuvkx", strict=True)),  # Greek
    **dict(zip("ΑΒΕΖΗΙΚΜΝΟΡΤΥΧ", "ABEZHIKMNOPTYX", strict=True)),  # Greek
    **dict(zip("օսցհոզ", "oughnq", strict=True)),  # Armenian
    **dict(zip("ıɑɡ", "iag", strict=True)),  # Latin letters that are not ASCII
    **dict(zip("∕⁄‐‑‒–—−", "//------", strict=True)),  # slashes and dashes
}


def _lookalike(ch: str) -> str | None:
    """The ASCII character ``ch`` passes for, if any."""
    known = _LOOKALIKES.get(ch)
    if known:
        return known
    normal = unicodedata.normalize("NFKC", ch)
    return normal if normal != ch and normal.isascii() and normal.isprintable() else None


def _script(ch: str) -> str | None:
    """The script a letter belongs to, from its Unicode name (LATIN, CYRILLIC, …)."""
    if not ch.isalpha():
        return None
    # Fullwidth and mathematical letters belong to the script they are forms of.
    name = unicodedata.name(unicodedata.normalize("NFKC", ch)[:1], "")
    return name.split(" ", 1)[0] if name else None


def confusable_warning(text: str) -> str | None:
    """Why ``text`` may not be what it looks like, or ``None`` when nothing is suspicious.

    Reported: characters that look like ASCII ones (Cyrillic 'а' for 'a', fullwidth forms,
    Unicode dashes and slashes), invisible or format characters, and letters from more than
    one script. The message shows the look-alike reading and each character by code point,
    e.g. ``looks like 'google/gemma' but has U+043E CYRILLIC SMALL LETTER O for 'o'``.
    """
    if text.isascii():
        return None
    letters = [ch for ch in text if ch.isalpha()]
    # Look-alikes matter beside Latin letters ("gооgle"), or when every letter has one
    # ("раураl" in Cyrillic); a Greek word that happens to contain an omicron does not.
    imitates_latin = "LATIN" in map(_script, letters) or all(
        ch.isascii() or _lookalike(ch) for ch in letters
    )
    reading: list[str] = []
    found: list[str] = []
    for ch in text:
        lookalike = _lookalike(ch) if imitates_latin and not ch.isascii() else None
        if lookalike:
            found.append(f"U+{ord(ch):04X} {unicodedata.name(ch, '')} for '{lookalike}'")
            reading.append(lookalike)
        elif not ch.isprintable() or unicodedata.category(ch) in ("Mn", "Me"):
            found.append(f"invisible U+{ord(ch):04X} {unicodedata.name(ch, 'unnamed')}")
        else:
            reading.append(ch)
    scripts = sorted({s for s in map(_script, letters) if s})
    if len(scripts) > 1:
        found.append(f"letters from {len(scripts)} scripts ({', '.join(scripts)})")
    if not found:
        return None
    shown = for_terminal("".join(reading))
    return f"looks like '{shown}' but has {'; '.join(dict.fromkeys(found))}"
