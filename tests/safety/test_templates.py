"""The chat-template audit: every hostile template is found with its kind and line, and the
real templates of the families modelreg records stay clean."""

from __future__ import annotations

from pathlib import Path

import pytest

from modelreg.safety.templates import audit_template, describe
from tests.safety.hostile import HOSTILE_TEMPLATES, SMOLLM2_TEMPLATE

REAL = Path(__file__).resolve().parent.parent / "corpus" / "templates" / "real"


def test_the_corpus_has_at_least_twelve_hostile_templates_of_every_kind() -> None:
    assert len(HOSTILE_TEMPLATES) >= 12
    kinds = {kind for _, _, kind in HOSTILE_TEMPLATES}
    assert {"internals", "built_name", "content_gated", "injection"} <= kinds


@pytest.mark.parametrize(
    ("template", "kind"),
    [(t, k) for _, t, k in HOSTILE_TEMPLATES],
    ids=[name for name, _, _ in HOSTILE_TEMPLATES],
)
def test_hostile_template_is_found_with_its_line(template: str, kind: str) -> None:
    findings = audit_template(template)
    assert kind in [f.kind for f in findings], [describe(f) for f in findings]
    found = next(f for f in findings if f.kind == kind)
    assert found.line is not None and found.excerpt
    assert (
        found.excerpt in template.splitlines()[found.line - 1]
        or found.excerpt.strip("…") in (template.splitlines()[found.line - 1])
    )


def test_real_template_corpus_covers_the_families() -> None:
    names = " ".join(p.name for p in REAL.glob("*.jinja"))
    for family in ("llama-3", "qwen2.5", "qwen3", "mistral", "gemma", "deepseek", "smollm2"):
        assert family in names


@pytest.mark.parametrize("path", sorted(REAL.glob("*.jinja")), ids=lambda p: p.name)
def test_real_template_has_no_finding(path: Path) -> None:
    assert audit_template(path.read_text(encoding="utf-8")) == []


def test_gadget_chain_names_the_gadget_and_the_gate() -> None:
    (finding,) = audit_template(HOSTILE_TEMPLATES[0][1])
    assert "'__init__.__globals__'" in finding.message
    assert "gadget 'cycler'" in finding.message
    assert "branch on message text" in finding.message
    assert "cycler.__init__.__globals__" in (finding.excerpt or "")


def test_content_tests_real_templates_use_are_not_gates() -> None:
    # Type tests, emptiness, a part's type, and a branch that only splits the text.
    template = (
        "{% for m in messages %}{% if m.content is string and m.content %}"
        "{{ m.content }}{% elif m.content|length > 0 %}{% for part in m.content %}"
        "{% if part['type'] == 'image' %}{{ '<start_of_image>' }}{% endif %}{% endfor %}"
        "{% endif %}{% if '</think>' in m.content %}"
        "{% set c = m.content.split('</think>')[-1] %}{% endif %}{% endfor %}"
    )
    assert audit_template(template) == []


def test_a_gate_on_role_writing_a_default_system_prompt_is_not_content_gated() -> None:
    assert audit_template(SMOLLM2_TEMPLATE) == []


def test_template_that_does_not_parse_is_unaudited() -> None:
    (finding,) = audit_template("{% for m in messages %}{{ m.content }")
    assert finding.kind == "unparsed" and finding.line == 1


def test_generation_tag_of_transformers_parses() -> None:
    template = (
        "{% for m in messages %}{% generation %}{{ m.content }}{% endgeneration %}{% endfor %}"
    )
    assert audit_template(template) == []


def test_a_long_line_is_quoted_around_the_finding() -> None:
    template = "{{ 'x' }}" * 200 + "{{ lipsum.__globals__ }}" + "{{ 'y' }}" * 200
    (finding,) = audit_template(template)
    assert finding.excerpt is not None and "lipsum.__globals__" in finding.excerpt
    assert len(finding.excerpt) <= 170
