"""Output that cannot lie: what a terminal, a Markdown renderer or a browser shows is the text
itself — no escape sequence, no reordering, no extra row, heading, link, HTML or comment."""

from __future__ import annotations

import html
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from modelreg.textsafe import confusable_warning, for_html, for_markdown, for_terminal

HOSTILE = [
    "\x1b[31mred\x1b[0m",  # ANSI CSI colour
    "\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\",  # OSC 8 hyperlink
    "\x1b[2J\x1b[H",  # clear screen, cursor home
    "\x9b31m",  # C1 CSI
    "abc\u202edcba",  # right-to-left override
    "x\u2066y\u2069",  # bidi isolate
    "zero\u200bwidth",
    "line one\nline two\r\n",
    "tab\there",
    "nb\u00a0space",
    "para\u2029sep",
    "lone \udcff surrogate",  # undecodable file name (surrogateescape)
    "bell\x07 del\x7f nul\x00",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_terminal_text_is_one_printable_line(text: str) -> None:
    shown = for_terminal(text)
    assert shown.isprintable() and "\n" not in shown and "\x1b" not in shown


def test_terminal_escapes_are_readable() -> None:
    assert for_terminal("a\x1b[31mb\u202ec\nd\x9b\udcff") == "a\\x1b[31mb\\u202ec\\nd\\x9b\\udcff"


@pytest.mark.parametrize("text", ["google/gemma-3-270m", "café", "模型", "😀 ok", "a\\b"])
def test_ordinary_text_is_unchanged(text: str) -> None:
    assert for_terminal(text) == text


@given(st.text())
def test_any_text_becomes_one_printable_line(text: str) -> None:
    shown = for_terminal(text)
    assert shown.isprintable()
    assert len(shown.splitlines()) <= 1


markdown_it = pytest.importorskip("markdown_it")
RENDERER = markdown_it.MarkdownIt("commonmark").enable(["table", "strikethrough"])
# What a license or a name might try inside a card.
MARKDOWN_ATTACKS = [
    "mit | evil |\n| injected | row |",
    "mit |\n| x | y |",
    "mit\n\n# Heading",
    "# heading",
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "<!-- hide the rest",
    "mit --> <!--",
    "[click](https://evil.example)",
    "![img](https://evil.example/x.png)",
    "<https://evil.example>",
    "`code` and ``more``",
    "**bold** _em_ ~~struck~~",
    "&lt;b&gt; &#124; &amp;",
    "\\| \\<b\\> \\",
    "- list item",
    "1. ordered",
    "2)",
    "0.3.36",
    "> quote",
    "a\x1b[31m\u202e",
    "====",
]


def _cells(rendered: str) -> list[str]:
    return [html.unescape(c) for c in re.findall(r"<td>(.*?)</td>", rendered, re.DOTALL)]


def _table(value: str) -> str:
    return RENDERER.render(f"| fact | value |\n|---|---|\n| license | {for_markdown(value)} |\n")


@pytest.mark.parametrize("value", MARKDOWN_ATTACKS)
def test_markdown_value_cannot_add_rows_html_links_or_comments(value: str) -> None:
    rendered = _table(value)
    assert rendered.count("<tr>") == 2, rendered  # header row and the one value row
    assert "<a " not in rendered and "<img" not in rendered and "<!--" not in rendered
    assert "<script" not in rendered and "<h1" not in rendered
    assert not re.search(r"<(em|strong|s|code|del)>", rendered), rendered
    assert _cells(rendered) == ["license", for_terminal(value).strip()]


@pytest.mark.parametrize("value", MARKDOWN_ATTACKS)
def test_markdown_value_at_the_start_of_a_line_stays_one_paragraph(value: str) -> None:
    rendered = RENDERER.render(for_markdown(value) + "\n")
    assert rendered.startswith("<p>") and rendered.count("<p>") == 1, rendered
    text = html.unescape(rendered.removeprefix("<p>").removesuffix("</p>\n"))
    assert text == for_terminal(value).strip()


@given(
    st.text(alphabet=st.sampled_from("|<>&`[]()#*_~!\\-+=.:/@w h1\n\r\t\x1b\u202e!-"), max_size=40)
)
def test_any_markdown_value_renders_as_itself_in_a_table_cell(value: str) -> None:
    rendered = _table(value)
    assert rendered.count("<tr>") == 2, rendered
    assert _cells(rendered) == ["license", for_terminal(value).strip(" ")]


@pytest.mark.parametrize("value", [*MARKDOWN_ATTACKS, "\"quoted\" 'single'"])
def test_html_value_is_text_only(value: str) -> None:
    shown = for_html(value)
    assert not set("<>\"'") & set(shown) and "\u202e" not in shown
    assert html.unescape(shown) == for_terminal(value)


@pytest.mark.parametrize(
    ("text", "reading", "culprit"),
    [
        ("gооgle/gemma", "google/gemma", "U+043E CYRILLIC SMALL LETTER O for 'o'"),
        ("Ԛwen/Qwen3", "Qwen/Qwen3", "U+051A CYRILLIC CAPITAL LETTER QA for 'Q'"),
        ("ｍeta/llama", "meta/llama", "U+FF4D FULLWIDTH LATIN SMALL LETTER M for 'm'"),
        ("org∕name", "org/name", "U+2215 DIVISION SLASH for '/'"),
        ("org/na\u200bme", "org/name", "invisible U+200B ZERO WIDTH SPACE"),
        ("org/nαme", "org/name", "GREEK SMALL LETTER ALPHA for 'a'"),
    ],
)
def test_confusables_are_named_with_the_reading_they_imitate(
    text: str, reading: str, culprit: str
) -> None:
    warning = confusable_warning(text)
    assert warning is not None
    assert warning.startswith(f"looks like '{reading}' but has ")
    assert culprit in warning


def test_mixed_scripts_are_named() -> None:
    warning = confusable_warning("googlе/gemma")
    assert warning is not None and "letters from 2 scripts (CYRILLIC, LATIN)" in warning


@pytest.mark.parametrize("text", ["google/gemma-3", "模型/名字", "Ελληνικά"])
def test_nothing_to_warn_about(text: str) -> None:
    assert confusable_warning(text) is None


@pytest.mark.parametrize(
    "value", ["apache-2.0", "llama-cpp-python 0.3.36", "google/gemma-3-270m", "cpu flags sha256:ab"]
)
def test_markdown_leaves_ordinary_values_alone(value: str) -> None:
    assert for_markdown(value) == value
