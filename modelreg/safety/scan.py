"""The safety scans of an artifact's files, as ``Finding``s: what ``add`` records (and holds
on) and what ``modelreg scan`` reports without a database.

- every chat template a runtime would render (``templates``): GGUF ``tokenizer.chat_template``
  and its named variants ``tokenizer.chat_template.<name>``; ``chat_template.jinja``,
  ``additional_chat_templates/*.jinja``, ``chat_template.json`` and tokenizer_config.json's
  ``chat_template`` (a string, or a list of ``{name, template}``);
- every file a runtime could unpickle (``pickles``);
- names that contradict the model id (``names``);
- invisible and bidirectional characters in metadata strings, templates and model cards.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from modelreg.safety.names import name_contradictions
from modelreg.safety.pickles import may_hold_pickle, scan_pickle_file
from modelreg.safety.templates import audit_template
from modelreg.schemas.manifest import Finding

GGUF_TEMPLATE_KEY = "tokenizer.chat_template"
TEMPLATE_JSON_FILES = ("tokenizer_config.json", "chat_template.json")
TEMPLATE_FILE = "chat_template.jinja"
ADDITIONAL_TEMPLATES = "additional_chat_templates"
CARD_FILES = ("README.md",)
MAX_TEXT_FILE_BYTES = 16 << 20
# Shown per finding at most: a file with thousands of hidden characters is one finding.
MAX_HIDDEN_SHOWN = 3


def gguf_templates(metadata: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(metadata key, template) for the default template and every named one."""
    found = []
    for key, value in metadata.items():
        if (key == GGUF_TEMPLATE_KEY or key.startswith(GGUF_TEMPLATE_KEY + ".")) and isinstance(
            value, str
        ):
            found.append((key, value))
    return sorted(found)


def json_object(path: Path) -> dict[str, Any] | None:
    try:
        if path.stat().st_size > MAX_TEXT_FILE_BYTES:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def directory_templates(directory: Path) -> list[tuple[str, str | None, str]]:
    """(file, where, template) for every chat template in a checkpoint or bundle directory."""
    found: list[tuple[str, str | None, str]] = []
    jinja = directory / TEMPLATE_FILE
    if jinja.is_file():
        found.append((TEMPLATE_FILE, None, read_text(jinja)))
    extra = directory / ADDITIONAL_TEMPLATES
    if extra.is_dir():
        for path in sorted(extra.glob("*.jinja")):
            found.append((f"{ADDITIONAL_TEMPLATES}/{path.name}", None, read_text(path)))
    for name in TEMPLATE_JSON_FILES:
        data = json_object(directory / name)
        template = data.get("chat_template") if data else None
        if isinstance(template, str):
            found.append((name, "chat_template", template))
        elif isinstance(template, list):
            for i, item in enumerate(template):
                if isinstance(item, dict) and isinstance(item.get("template"), str):
                    label = item.get("name") if isinstance(item.get("name"), str) else str(i)
                    found.append((name, f"chat_template[{label}]", item["template"]))
    return found


def read_text(path: Path) -> str:
    with path.open("rb") as fh:
        return fh.read(MAX_TEXT_FILE_BYTES).decode("utf-8", errors="replace")


def template_findings(file: str, where: str | None, template: str) -> list[Finding]:
    """The audit of one template (``safety.templates``), and the characters it hides."""
    findings = [
        Finding(
            code="unsafe_template",
            file=file,
            where=where,
            message=f.message,
            line=f.line,
            excerpt=f.excerpt,
            unknown=f.kind == "unparsed",
        )
        for f in audit_template(template)
    ]
    hidden = hidden_characters(template)
    if hidden:
        # An invisible character in a template reaches the model, not the reviewer (Unicode
        # tag characters smuggle whole instructions): held like any other unsafe template.
        findings.append(
            Finding(
                code="unsafe_template",
                file=file,
                where=where,
                message=f"hides characters a reader cannot see: {hidden}",
            )
        )
    return findings


def hidden_characters(text: str) -> str | None:
    """The invisible / bidirectional characters in ``text`` (format characters such as
    U+202E or U+200B, Unicode tags, controls other than newline and tab), described; None when
    there are none. A leading byte-order mark is not counted."""
    counts: dict[str, int] = {}
    for i, ch in enumerate(text):
        if ch in "\n\r\t" or (i == 0 and ch == "\ufeff"):
            continue
        category = unicodedata.category(ch)
        if category in ("Cf", "Cc", "Co", "Cs") or ch in ("\u2028", "\u2029"):
            counts[ch] = counts.get(ch, 0) + 1
    if not counts:
        return None
    shown = [
        f"U+{ord(ch):04X} {unicodedata.name(ch, 'unnamed')}" + (f" ×{n}" if n > 1 else "")
        for ch, n in sorted(counts.items(), key=lambda kv: -kv[1])[:MAX_HIDDEN_SHOWN]
    ]
    more = len(counts) - MAX_HIDDEN_SHOWN
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def gguf_findings(file: str, metadata: Mapping[str, Any], model_id: str | None) -> list[Finding]:
    """Templates, names and hidden characters of a GGUF file's metadata."""
    findings: list[Finding] = []
    for key, template in gguf_templates(metadata):
        findings += template_findings(file, key, template)
    for key, value in sorted(metadata.items()):
        if not isinstance(value, str) or key == GGUF_TEMPLATE_KEY:
            continue
        if key.startswith(GGUF_TEMPLATE_KEY + "."):
            continue
        hidden = hidden_characters(value)
        if hidden:
            findings.append(
                Finding(
                    code="hidden_text",
                    file=file,
                    where=key,
                    message=f"hides characters a reader cannot see: {hidden}",
                    holds=False,
                )
            )
    if model_id is not None:
        names = {
            f"gguf:{key}": value
            for key in ("general.basename",)
            if isinstance(value := metadata.get(key), str) and value.strip()
        }
        for source, problem in name_contradictions(model_id, names):
            findings.append(
                Finding(code="identity_mismatch", file=file, where=source, message=problem)
            )
    return findings


def pickle_findings(directory: Path, names: Iterable[str]) -> list[Finding]:
    """Every pickle-bearing file among ``names`` (relative to ``directory``), scanned."""
    findings: list[Finding] = []
    for name in sorted(set(names)):
        path = directory / name
        if not may_hold_pickle(name) and not starts_like_pickle(path):
            continue
        if not path.is_file():
            continue
        for f in scan_pickle_file(path):
            findings.append(
                Finding(
                    code="unsafe_pickle",
                    file=name,
                    where=f.member,
                    message=f.message,
                )
            )
    return findings


def starts_like_pickle(path: Path) -> bool:
    """A file named like anything that starts like a pickle (a ``.bin`` of another suffix)."""
    try:
        with path.open("rb") as fh:
            head = fh.read(2)
    except OSError:
        return False
    return len(head) == 2 and head[0] == 0x80 and head[1] <= 5


def directory_findings(directory: Path, names: Iterable[str]) -> list[Finding]:
    """Templates, pickles and card text of a checkpoint or bundle directory: ``names`` are
    the files a runtime could load from it (recorded or not)."""
    names = list(names)
    findings: list[Finding] = []
    for file, where, template in directory_templates(directory):
        findings += template_findings(file, where, template)
    findings += pickle_findings(directory, names)
    for card in CARD_FILES:
        path = directory / card
        if path.is_file():
            hidden = hidden_characters(read_text(path))
            if hidden:
                findings.append(
                    Finding(
                        code="hidden_text",
                        file=card,
                        message=f"hides characters a reader cannot see: {hidden}",
                        holds=False,
                    )
                )
    return findings
