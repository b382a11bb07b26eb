"""Chat-template audit: parse with jinja2 (never render) and walk the syntax tree.

A chat template is code a runtime runs on every request (llama-cpp-python and transformers
render it in jinja2's sandbox, llama.cpp in its own engine). The sandbox refuses ``__globals__``
at render time — after the record was added, verified on a prompt that never reached the branch,
and promoted. So the tree is read at add and a record is held (``unsafe_template``) when its
template

- reaches Python internals: an attribute or item whose name starts with ``_`` (dunders, and
  name-mangled privates such as ``self._TemplateReference__context``) or names a frame / code
  object (``gi_frame``, ``f_globals``, ``mro``…), whatever object it starts from — the known
  gadgets (``cycler``, ``joiner``, ``namespace``, ``lipsum``, ``self``, ``range``, ``dict``…)
  are named in the finding;
- builds an attribute or item name from strings (``|attr``, ``~`` / ``+`` concatenation,
  ``|format``, ``|join``, ``|replace``, ``.format()``…) instead of writing it out: the name is
  folded when it can be, and a name that cannot be folded is held as unknown;
- loads another template (``include``, ``import``, ``extends``);
- emits instructions only when a message's text matches something: a branch whose test reads
  message text with a value operation (``'deploy' in message['content']``,
  ``.startswith(…)``, ``== '…'``) and that writes prose (two or more words once special tokens
  such as ``<|im_start|>`` or ``[INST]`` are removed). What real templates do is left alone:
  tests of a message's type (``is string``), emptiness (``if content``), role and tool fields,
  a content part's ``type``, and branches that only split or strip the text (Qwen's
  ``'</think>' in content``);
- writes a known prompt-injection phrase anywhere ("ignore all previous instructions"…).

Each finding names the template line (number and text).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from jinja2 import nodes
from jinja2.exceptions import TemplateSyntaxError
from jinja2.ext import Extension, loopcontrols
from jinja2.parser import Parser
from jinja2.sandbox import (
    UNSAFE_ASYNC_GENERATOR_ATTRIBUTES,
    UNSAFE_COROUTINE_ATTRIBUTES,
    UNSAFE_GENERATOR_ATTRIBUTES,
    ImmutableSandboxedEnvironment,
)

# Beyond ``_``-prefixed names: attributes of frames, code objects, tracebacks and functions
# that lead to globals or code (jinja2's own lists, and the Python 2 spellings and frame fields
# its sandbox checks by type).
INTERNAL_ATTRIBUTES = frozenset(
    UNSAFE_GENERATOR_ATTRIBUTES
    | UNSAFE_COROUTINE_ATTRIBUTES
    | UNSAFE_ASYNC_GENERATOR_ATTRIBUTES
    | {
        "mro",
        "func_globals",
        "func_code",
        "func_closure",
        "im_func",
        "im_self",
        "im_class",
        "f_globals",
        "f_locals",
        "f_builtins",
        "f_back",
        "f_code",
        "tb_frame",
        "tb_next",
        "co_code",
    }
)
# Globals jinja2 (and Flask) put in a template's namespace whose attributes lead to Python:
# named in a finding when a chain starts from one.
GADGETS = frozenset(
    {
        "cycler",
        "joiner",
        "namespace",
        "lipsum",
        "self",
        "range",
        "dict",
        "config",
        "request",
        "url_for",
        "get_flashed_messages",
        "loop",
        "caller",
        "varargs",
        "kwargs",
        "raise_exception",
        "strftime_now",
    }
)
# Keys whose value is a message's (or a content part's) text.
TEXT_KEYS = frozenset({"content", "text", "reasoning_content"})
# str methods whose result is still the text (or part of it).
_TEXT_METHODS = frozenset(
    {
        "split",
        "rsplit",
        "strip",
        "lstrip",
        "rstrip",
        "lower",
        "upper",
        "casefold",
        "title",
        "capitalize",
        "replace",
        "removeprefix",
        "removesuffix",
        "partition",
        "rpartition",
        "splitlines",
    }
)
# str methods that compare the text with something: a test that calls one reads its value.
_VALUE_METHODS = frozenset(
    {
        "startswith",
        "endswith",
        "find",
        "rfind",
        "index",
        "rindex",
        "count",
        "split",
        "rsplit",
        "partition",
        "rpartition",
        "replace",
        "__contains__",
    }
)
# jinja2 tests that compare a value with another (``is equalto('x')``), not its type.
_VALUE_TESTS = frozenset(
    {
        "eq",
        "equalto",
        "==",
        "ne",
        "!=",
        "in",
        "sameas",
        "gt",
        "greaterthan",
        ">",
        "ge",
        ">=",
        "lt",
        "lessthan",
        "<",
        "le",
        "<=",
        "lower",
        "upper",
    }
)
# Filters whose result is a number or a type, not the text.
_NOT_TEXT_FILTERS = frozenset({"length", "count", "wordcount", "int", "float", "abs"})
# Filters and methods that build a string from parts: an attribute name made with one is
# built, not written out.
_BUILDING_FILTERS = frozenset(
    {"format", "join", "replace", "reverse", "string", "lower", "upper", "capitalize", "title"}
)
_BUILDING_METHODS = frozenset({"format", "format_map", "join", "replace", "lower", "upper"})
# Filters that take an attribute name (``map(attribute=…)``, ``selectattr('x')``…).
_ATTRIBUTE_FILTERS = frozenset(
    {"attr", "map", "selectattr", "rejectattr", "sort", "groupby", "sum", "unique", "min", "max"}
)
# Special tokens and markup that are structure, not prose: ``<|im_start|>``, ``<start_of_turn>``,
# ``</think>``, ``[INST]``, ``<｜User｜>``.
_SPECIAL_TOKEN_RE = re.compile(
    r"<\|[^|<>]{0,80}\|>|<｜[^｜<>]{0,80}｜>|</?[A-Za-z_][\w.:-]{0,60}>|\[/?[A-Z_]{2,40}\]"
)
_WORD_RE = re.compile(r"[^\W\d_]{2,}")
# Phrases of prompt injection: no chat template has a reason to write them.
_INJECTION_RE = re.compile(
    r"ignore\s+(?:all\s+|any\s+)?(?:the\s+|your\s+)?(?:previous|prior|above|earlier|preceding)"
    r"\s+(?:instructions|messages|rules|guidelines|directions)"
    r"|disregard\s+(?:all\s+|any\s+)?(?:the\s+|your\s+)?(?:previous|prior|above|system|safety)"
    r"|(?:do\s+not|don't|never)\s+(?:tell|inform|reveal\s+(?:this\s+)?to|mention\s+(?:this\s+)?to)"
    r"\s+the\s+user"
    r"|system\s+override|developer\s+mode\s+enabled|jailbreak"
    r"|(?:exfiltrate|leak|upload|send|post)\s+.{0,40}?(?:credentials|secrets?|api[\s_-]?keys?"
    r"|passwords?|tokens?|ssh\s+keys?)"
    r"|(?:curl|wget)\s+(?:-\S+\s+)*https?://",
    re.IGNORECASE,
)
MAX_EXCERPT = 160


@dataclass(frozen=True)
class TemplateFinding:
    """One reason a template is unsafe: ``internals`` (reaches Python internals),
    ``built_name`` (an attribute name built from strings), ``loads_template``,
    ``content_gated`` (instructions gated on message text), ``injection`` (a known injection
    phrase), or ``unparsed`` (jinja2 cannot parse it, so it was not audited)."""

    kind: str
    message: str
    line: int | None
    excerpt: str | None


class _GenerationTag(Extension):
    """transformers' ``{% generation %}…{% endgeneration %}`` (it marks the assistant's
    tokens): parsed as its body, which is what it renders."""

    tags = frozenset({"generation"})  # type: ignore[assignment]

    def parse(self, parser: Parser) -> list[nodes.Node]:
        next(parser.stream)
        return list(parser.parse_statements(("name:endgeneration",), drop_needle=True))


def _environment() -> ImmutableSandboxedEnvironment:
    # As transformers configures it (loop controls, generation tag, trimmed blocks); parsing
    # is all it is used for.
    return ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols, _GenerationTag]
    )


def excerpt(source: str, line: int | None, needle: str | None = None) -> str | None:
    """The template's ``line`` (1-based), cut to MAX_EXCERPT characters around ``needle``."""
    lines = source.splitlines()
    if line is None or not 1 <= line <= len(lines):
        return None
    text = lines[line - 1].strip()
    if len(text) <= MAX_EXCERPT:
        return text
    at = text.find(needle) if needle else -1
    start = max(0, min(at - MAX_EXCERPT // 3, len(text) - MAX_EXCERPT)) if at >= 0 else 0
    cut = text[start : start + MAX_EXCERPT]
    return ("…" if start else "") + cut + ("…" if start + MAX_EXCERPT < len(text) else "")


def _children(node: nodes.Node) -> Iterator[nodes.Node]:
    return node.iter_child_nodes()


def _walk(node: nodes.Node) -> Iterator[nodes.Node]:
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(list(_children(current))))


def _target_names(target: nodes.Node) -> list[str]:
    """The variable paths a ``set`` / ``for`` target binds: ``x``, ``ns.x``, tuple parts."""
    if isinstance(target, nodes.Name):
        return [target.name]
    if isinstance(target, nodes.NSRef):
        return [f"{target.name}.{target.attr}"]
    if isinstance(target, nodes.Tuple):
        return [name for item in target.items for name in _target_names(item)]
    return []


def _path(node: nodes.Node) -> str | None:
    """``x`` for a name, ``ns.x`` for a namespace attribute: a variable a ``set`` can bind."""
    if isinstance(node, nodes.Name):
        return str(node.name)
    if isinstance(node, nodes.Getattr) and isinstance(node.node, nodes.Name):
        return f"{node.node.name}.{node.attr}"
    return None


def _key(node: nodes.Getattr | nodes.Getitem) -> str | None:
    if isinstance(node, nodes.Getattr):
        return str(node.attr)
    arg = node.arg
    if isinstance(arg, nodes.Const) and isinstance(arg.value, str):
        return arg.value
    return None


def _is_internal(name: str) -> bool:
    return name.startswith("_") or name in INTERNAL_ATTRIBUTES


def _root_name(node: nodes.Node | None) -> str | None:
    while isinstance(node, nodes.Getattr | nodes.Getitem | nodes.Call | nodes.Filter):
        node = node.node
    return str(node.name) if isinstance(node, nodes.Name) else None


class _Audit:
    def __init__(self, source: str, tree: nodes.Template) -> None:
        self.source = source
        self.tree = tree
        self.findings: list[TemplateFinding] = []
        self.seen: set[tuple[str, int | None, str]] = set()
        # (line, gadget, gate) -> internal names reached there: one finding per chain.
        self.internals: dict[tuple[int, str, str], list[str]] = {}
        self.text_vars: set[str] = set()
        self.strings: dict[str, str | None] = {}  # var -> folded value (None: built, unknown)
        self.macros: dict[str, nodes.Macro] = {
            m.name: m for m in tree.find_all(nodes.Macro) if isinstance(m, nodes.Macro)
        }
        self._bind_variables()

    # --- what variables hold ------------------------------------------------------------
    def _bindings(self) -> Iterator[tuple[list[str], nodes.Node | None, bool]]:
        """(names, value, is a loop over value) for every ``set``, ``for`` and ``with``."""
        for node in self.tree.find_all((nodes.Assign, nodes.For, nodes.With, nodes.AssignBlock)):
            if isinstance(node, nodes.Assign):
                yield _target_names(node.target), node.node, False
            elif isinstance(node, nodes.For):
                yield _target_names(node.target), node.iter, True
            elif isinstance(node, nodes.AssignBlock):
                yield _target_names(node.target), None, False
            elif isinstance(node, nodes.With):
                for target, value in zip(node.targets, node.values, strict=False):
                    yield _target_names(target), value, False

    def _bind_variables(self) -> None:
        """Which variables hold message text, and which strings built from parts (folded
        when possible), to a fixed point (a template is small)."""
        bindings = list(self._bindings())
        for _ in range(len(bindings) + 1):
            changed = False
            for names, value, loop in bindings:
                if value is None:
                    continue
                text = self.reads_text(value)
                built = not loop and self.is_built(value)
                folded = self.fold(value) if built else None
                for name in names:
                    if text and name not in self.text_vars:
                        self.text_vars.add(name)
                        changed = True
                    if built and self.strings.get(name, "") != folded:
                        self.strings[name] = folded
                        changed = True
            if not changed:
                return

    def reads_text(self, node: nodes.Node) -> bool:
        """Whether ``node``'s value is (part of) a message's text."""
        if isinstance(node, nodes.Name):
            return node.name in self.text_vars
        if isinstance(node, nodes.Getattr | nodes.Getitem):
            key = _key(node)
            path = _path(node)
            if path is not None and path in self.text_vars:
                return True
            if key is not None:
                if key in TEXT_KEYS:
                    return True
                return key in _TEXT_METHODS and self.reads_text(node.node)
            return self.reads_text(node.node)  # an index or slice of the text
        if isinstance(node, nodes.Test):
            return False
        if isinstance(node, nodes.Filter):
            if node.name in _NOT_TEXT_FILTERS:
                return False
            return node.node is not None and self.reads_text(node.node)
        if isinstance(node, nodes.Call):
            return self.reads_text(node.node)
        if isinstance(node, nodes.Const | nodes.TemplateData):
            return False
        if isinstance(node, nodes.Compare | nodes.Not | nodes.And | nodes.Or):
            return False
        return any(self.reads_text(child) for child in _children(node))

    def is_built(self, node: nodes.Node) -> bool:
        """Whether ``node`` is a string made from parts (or a variable holding one)."""
        if isinstance(node, nodes.Name):
            return node.name in self.strings
        if isinstance(node, nodes.Concat | nodes.Mod):
            return True
        if isinstance(node, nodes.Add | nodes.Mul):
            return any(self._stringish(side) for side in (node.left, node.right))
        if isinstance(node, nodes.Filter):
            return node.name in _BUILDING_FILTERS
        if isinstance(node, nodes.Call) and isinstance(node.node, nodes.Getattr):
            return node.node.attr in _BUILDING_METHODS
        if isinstance(node, nodes.CondExpr):
            return any(self.is_built(n) for n in (node.expr1, node.expr2) if n is not None)
        return False

    def _stringish(self, node: nodes.Node) -> bool:
        return (isinstance(node, nodes.Const) and isinstance(node.value, str)) or self.is_built(
            node
        )

    def fold(self, node: nodes.Node) -> str | None:
        """The constant string ``node`` evaluates to, when it is made of constants only."""
        value = self._fold(node)
        return value if isinstance(value, str) else None

    def _fold(self, node: nodes.Node) -> str | int | None:
        if isinstance(node, nodes.Const):
            return node.value if isinstance(node.value, str | int) else None
        if isinstance(node, nodes.Name):
            return self.strings.get(node.name)
        if isinstance(node, nodes.Concat):
            parts = [self._fold(n) for n in node.nodes]
            return None if None in parts else "".join(str(p) for p in parts)
        if isinstance(node, nodes.Add):
            left, right = self._fold(node.left), self._fold(node.right)
            if isinstance(left, str) and isinstance(right, str):
                return left + right
            return None
        if isinstance(node, nodes.Mul):
            left, right = self._fold(node.left), self._fold(node.right)
            if isinstance(left, str) and isinstance(right, int) and 0 <= right <= 64:
                return left * right
            if isinstance(right, str) and isinstance(left, int) and 0 <= left <= 64:
                return right * left
            return None
        if isinstance(node, nodes.Filter) and node.node is not None:
            inner = self._fold(node.node)
            args = [self._fold(a) for a in node.args]
            if inner is None or any(a is None for a in args):
                return None
            return _apply_filter(node.name, str(inner), [str(a) for a in args])
        if isinstance(node, nodes.List | nodes.Tuple):
            return None
        return None

    # --- findings -----------------------------------------------------------------------
    def add(
        self, kind: str, message: str, node: nodes.Node | _Line | None, needle: str | None
    ) -> None:
        line = getattr(node, "lineno", None) if node is not None else None
        key = (kind, line, message)
        if key in self.seen:
            return
        self.seen.add(key)
        self.findings.append(
            TemplateFinding(kind, message, line, excerpt(self.source, line, needle))
        )

    def _check_node(self, node: nodes.Node, gated: str) -> None:
        if isinstance(node, nodes.Getattr | nodes.Getitem):
            name = _key(node)
            root = _root_name(node)
            via = f" through the gadget {root!r}" if root in GADGETS else ""
            if name is not None and _is_internal(name):
                self.internals.setdefault((node.lineno, via, gated), []).append(name)
            elif isinstance(node, nodes.Getitem) and self.is_built(node.arg):
                folded = self.fold(node.arg)
                if folded is None:
                    self.add(
                        "built_name",
                        f"looks up an item whose name is built from strings{via}: what it "
                        f"reaches is unknown{gated}",
                        node,
                        None,
                    )
                elif _is_internal(folded):
                    self.add(
                        "internals",
                        f"reaches Python internals: {folded!r}, built from strings{via}{gated}",
                        node,
                        None,
                    )
        elif isinstance(node, nodes.Filter) and node.name in _ATTRIBUTE_FILTERS:
            self._check_attribute_argument(node, gated)
        elif isinstance(node, nodes.Call) and isinstance(node.node, nodes.Getattr):
            method = node.node.attr
            if method in ("format", "format_map"):
                fmt = self.fold(node.node.node)
                if isinstance(fmt, str) and re.search(r"\{[^{}]*[.\[][^{}]*\}", fmt):
                    self.add(
                        "internals",
                        f"formats with field access {fmt[:40]!r}: str.format reaches "
                        f"attributes{gated}",
                        node,
                        "format",
                    )

    def report_internals(self) -> None:
        lines = self.source.splitlines()
        for (line, via, gated), names in self.internals.items():
            text = lines[line - 1] if 0 < line <= len(lines) else ""
            ordered = sorted(dict.fromkeys(names), key=lambda n: (text.find(n), n))
            shown = ".".join(ordered) if len(ordered) > 1 else ordered[0]
            self.add(
                "internals",
                f"reaches Python internals: {shown!r}{via}{gated}",
                _Line(line),
                ordered[0],
            )

    def _check_attribute_argument(self, node: nodes.Filter, gated: str) -> None:
        candidates: list[nodes.Node] = []
        if node.name == "attr" or node.name in ("selectattr", "rejectattr", "groupby", "sum"):
            candidates = list(node.args[:1])
        candidates += [kw.value for kw in node.kwargs if kw.key == "attribute"]
        for arg in candidates:
            folded = self.fold(arg)
            if isinstance(folded, str):
                if any(_is_internal(part) for part in folded.split(".")):
                    self.add(
                        "internals",
                        f"reaches Python internals: |{node.name}({folded!r}){gated}",
                        node,
                        node.name,
                    )
            elif node.name == "attr" or self.is_built(arg):
                self.add(
                    "built_name",
                    f"|{node.name} with an attribute name that is not written out: what it "
                    f"reaches is unknown{gated}",
                    node,
                    node.name,
                )

    def check_loads(self) -> None:
        for node in self.tree.find_all(
            (nodes.Include, nodes.Import, nodes.FromImport, nodes.Extends)
        ):
            what = type(node).__name__.lower().replace("fromimport", "from-import")
            self.add(
                "loads_template",
                f"loads another template ({what}): what it renders is not in this one",
                node,
                None,
            )

    # --- content-gated instructions -----------------------------------------------------
    def is_gated(self, test: nodes.Node) -> bool:
        """Whether a test compares message text with something (not its type or emptiness)."""
        for node in _walk(test):
            if isinstance(node, nodes.Compare):
                operands = [node.expr, *(op.expr for op in node.ops)]
                for i, op in enumerate(node.ops):
                    left, right = operands[i], operands[i + 1]
                    if op.op in ("in", "notin"):
                        if self.reads_text(left) or self.reads_text(right):
                            return True
                    elif (self.reads_text(left) and not _empty(right)) or (
                        self.reads_text(right) and not _empty(left)
                    ):
                        return True
            elif isinstance(node, nodes.Call) and isinstance(node.node, nodes.Getattr):
                if node.node.attr in _VALUE_METHODS and self.reads_text(node.node.node):
                    return True
            elif isinstance(node, nodes.Test) and node.name in _VALUE_TESTS:
                if self.reads_text(node.node):
                    return True
            elif isinstance(node, nodes.Filter) and node.name in ("selectattr", "rejectattr"):
                first = node.args[0] if node.args else None
                if (
                    isinstance(first, nodes.Const)
                    and first.value in TEXT_KEYS
                    and len(node.args) > 1
                ):
                    return True
        return False

    def emitted(self, body: list[nodes.Node], depth: int = 0) -> Iterator[tuple[str, nodes.Node]]:
        """The constant strings a region writes (or stores, to write later), with their node."""
        for stmt in body:
            for node in _walk(stmt):
                if isinstance(node, nodes.TemplateData):
                    yield node.data, node
                elif isinstance(node, nodes.Output):
                    for expr in node.nodes:
                        yield from ((s, expr) for s in self._strings_of(expr))
                elif isinstance(node, nodes.Assign):
                    yield from ((s, node) for s in self._strings_of(node.node))
                elif isinstance(node, nodes.Call) and isinstance(node.node, nodes.Name):
                    macro = self.macros.get(node.node.name)
                    if macro is not None and depth < 4:
                        yield from self.emitted(list(macro.body), depth + 1)

    def _strings_of(self, expr: nodes.Node) -> Iterator[str]:
        if isinstance(expr, nodes.Const) and isinstance(expr.value, str):
            yield expr.value
        elif isinstance(expr, nodes.TemplateData):
            yield expr.data
        elif isinstance(expr, nodes.Concat):
            for part in expr.nodes:
                yield from self._strings_of(part)
        elif isinstance(expr, nodes.Add | nodes.Mod):
            yield from self._strings_of(expr.left)
            yield from self._strings_of(expr.right)
        elif isinstance(expr, nodes.CondExpr):
            for branch in (expr.expr1, expr.expr2):
                if branch is not None:
                    yield from self._strings_of(branch)
        elif isinstance(expr, nodes.Filter) and expr.node is not None:
            yield from self._strings_of(expr.node)

    def check_gates(self) -> None:
        for node in self.tree.find_all((nodes.If, nodes.CondExpr, nodes.For)):
            assert isinstance(node, nodes.If | nodes.CondExpr | nodes.For)
            test = node.test
            if test is None or not self.is_gated(test):
                continue
            strings: list[tuple[str, nodes.Node]]
            if isinstance(node, nodes.If):
                region: list[nodes.Node] = [*node.body, *node.elif_, *node.else_]
                strings = list(self.emitted(region))
            elif isinstance(node, nodes.For):
                strings = list(self.emitted([*node.body, *node.else_]))
            else:
                strings = [
                    (s, node)
                    for part in (node.expr1, node.expr2)
                    if part is not None
                    for s in self._strings_of(part)
                ]
            prose = [s for s, _ in strings if _is_prose(s)]
            if prose:
                shown = " ".join(prose[0].split())[:80]
                self.add(
                    "content_gated",
                    f"writes instructions only when a message's text matches: {shown!r}",
                    node,
                    None,
                )

    def check_injection(self) -> None:
        for node in self.tree.find_all((nodes.TemplateData, nodes.Const)):
            value = (
                node.data if isinstance(node, nodes.TemplateData) else getattr(node, "value", None)
            )
            if not isinstance(value, str):
                continue
            match = _INJECTION_RE.search(value)
            if match:
                self.add(
                    "injection",
                    f"writes a prompt-injection phrase: {match.group(0)!r}",
                    node,
                    match.group(0)[:20],
                )

    def gate_lines(self) -> dict[int, int]:
        """Line of each node inside a content-gated branch -> the line of its test."""
        lines: dict[int, int] = {}
        for node in self.tree.find_all(nodes.If):
            if node.test is not None and self.is_gated(node.test):
                for stmt in [*node.body, *node.elif_, *node.else_]:
                    for inner in _walk(stmt):
                        lines.setdefault(inner.lineno, node.lineno)
        return lines


@dataclass(frozen=True)
class _Line:
    lineno: int


def _empty(node: nodes.Node) -> bool:
    """A comparison with this is an emptiness test: '' / none / 0 / [] / {}."""
    if isinstance(node, nodes.Const):
        return node.value in ("", None, 0, False)
    if isinstance(node, nodes.Name):
        return node.name in ("none", "None")
    if isinstance(node, nodes.List | nodes.Dict | nodes.Tuple):
        return not list(_children(node))
    return False


def _is_prose(text: str) -> bool:
    """Two or more words once special tokens are taken out."""
    return len(_WORD_RE.findall(_SPECIAL_TOKEN_RE.sub(" ", text))) >= 2


def _apply_filter(name: str, value: str, args: list[str]) -> str | None:
    if name in ("lower", "upper", "capitalize", "title"):
        return str(getattr(value, name)())
    if name == "reverse":
        return value[::-1]
    if name == "string":
        return value
    if name == "replace" and len(args) >= 2:
        return value.replace(args[0], args[1])
    if name == "format":
        try:
            return value % tuple(args)
        except (TypeError, ValueError):
            return None
    if name == "join":
        return (args[0] if args else "").join(value)
    return None


def audit_template(source: str) -> list[TemplateFinding]:
    """Every reason ``source`` (a chat template) is unsafe to render; empty when none."""
    try:
        tree = _environment().parse(source)
    except TemplateSyntaxError as exc:
        return [
            TemplateFinding(
                "unparsed",
                f"jinja2 cannot parse it ({exc.message}): not audited",
                exc.lineno,
                excerpt(source, exc.lineno),
            )
        ]
    except RecursionError:
        return [TemplateFinding("unparsed", "nested too deeply to parse: not audited", None, None)]
    audit = _Audit(source, tree)
    gates = audit.gate_lines()
    for node in tree.find_all((nodes.Getattr, nodes.Getitem, nodes.Filter, nodes.Call)):
        line = getattr(node, "lineno", None)
        gate = gates.get(line) if line is not None else None
        audit._check_node(node, f" (inside a branch on message text, line {gate})" if gate else "")
    audit.report_internals()
    audit.check_loads()
    audit.check_gates()
    audit.check_injection()
    return sorted(audit.findings, key=lambda f: (f.line or 0, f.kind))


def describe(finding: TemplateFinding) -> str:
    """``message (line N: `excerpt`)``."""
    if finding.line is None:
        return finding.message
    shown = f": {finding.excerpt}" if finding.excerpt else ""
    return f"{finding.message} (line {finding.line}{shown})"
