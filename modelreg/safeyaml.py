"""YAML from files modelreg did not write (model cards, recipes, targets): plain data only.

The loader itself refuses what plain data never needs and an attacker does:

- anchors and aliases (``&a`` / ``*a``, and ``<<`` merge keys): an alias bomb ("billion
  laughs") expands to billions of nodes from a few hundred bytes, wherever the anchor sits in
  the file — refused from the parser's events, not by looking at the text;
- nesting deeper than ``max_depth``: composing is recursive, so ``[[[[…`` ends in a
  ``RecursionError``;
- mapping keys that are not strings (``1:``, ``yes:``, ``null:``, ``[a]:``), which the code
  reading the data would trip over, and keys given twice (a reader takes the last, a person
  reading the file the first);
- ``.inf``, ``.nan`` and integers beyond 64 bits, never a meaningful size, count or limit;
- sets, ordered maps, pairs and binary; dates are kept as the text they are written as.

Every problem is one ``InvalidInput`` (``InvalidArtifact`` for the file itself) naming the file,
line and column.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Any

from modelreg.boundedfile import read_bounded
from modelreg.errors import InvalidArtifact, InvalidInput
from modelreg.textsafe import for_terminal

MAX_YAML_DEPTH = 32
_STR_TAG = "tag:yaml.org,2002:str"
_MERGE_TAG = "tag:yaml.org,2002:merge"
# Sizes, counts and limits fit a signed 64-bit column; anything longer is not a measurement.
_INT_LIMIT = 2**63


class _Refused(Exception):
    """Raised inside the loader; ``load_yaml`` turns it into ``InvalidInput``."""

    def __init__(self, reason: str, mark: Any) -> None:
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        super().__init__(f"{reason}{where}")


@functools.cache
def _loader_class() -> type:
    import yaml

    class PlainDataLoader(yaml.SafeLoader):
        """``SafeLoader`` without anchors, aliases, merge keys, non-string keys, non-finite
        floats, and with bounded nesting."""

        max_depth = MAX_YAML_DEPTH

        def __init__(self, stream: str) -> None:
            super().__init__(stream)
            self.depth = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            event = self.peek_event()  # type: ignore[no-untyped-call]
            if isinstance(event, yaml.AliasEvent):
                raise _Refused(
                    f"YAML alias *{event.anchor} is not accepted (write the value out)",
                    event.start_mark,
                )
            if getattr(event, "anchor", None) is not None:
                raise _Refused(
                    f"YAML anchor &{event.anchor} is not accepted (write the value out)",
                    event.start_mark,
                )
            self.depth += 1
            if self.depth > self.max_depth:
                raise _Refused(f"YAML nested deeper than {self.max_depth} levels", event.start_mark)
            try:
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen: set[str] = set()
            for key_node, _ in node.value:
                if key_node.tag == _MERGE_TAG:
                    raise _Refused(
                        "YAML merge key '<<' is not accepted (write the keys out)",
                        key_node.start_mark,
                    )
                if not (isinstance(key_node, yaml.ScalarNode) and key_node.tag == _STR_TAG):
                    shown = for_terminal(str(getattr(key_node, "value", ""))[:40])
                    if isinstance(key_node, yaml.ScalarNode):
                        why = f"mapping key '{shown}' is not a string (quote it)"
                    else:
                        why = "a mapping key is not a string"
                    raise _Refused(why, key_node.start_mark)
                if key_node.value in seen:
                    # The reader would take the last one, a person the first.
                    raise _Refused(
                        f"mapping key '{for_terminal(key_node.value[:40])}' appears twice",
                        key_node.start_mark,
                    )
                seen.add(key_node.value)
            return super().construct_mapping(node, deep=deep)

        def construct_bounded_int(self, node: Any) -> int:
            shown = for_terminal(node.value[:24]) + ("…" if len(node.value) > 24 else "")
            too_large = _Refused(f"integer {shown} does not fit in 64 bits", node.start_mark)
            if len(node.value) > 100:  # before int(): converting 5000 digits costs real time
                raise too_large
            value = int(self.construct_yaml_int(node))
            if not -_INT_LIMIT <= value < _INT_LIMIT:
                raise too_large
            return value

        def construct_finite_float(self, node: Any) -> float:
            value = float(self.construct_yaml_float(node))
            if not math.isfinite(value):
                raise _Refused(f"{node.value!r} is not a finite number", node.start_mark)
            return value

        def construct_date_as_text(self, node: Any) -> str:
            return str(self.construct_scalar(node))

        def refuse_tag(self, node: Any) -> Any:
            tag = node.tag.removeprefix("tag:yaml.org,2002:")
            raise _Refused(f"YAML type !!{tag} is not plain data", node.start_mark)

    # Dates stay the text they are (a datetime is not JSON, and "2024-13-45" would raise);
    # sets, ordered maps, pairs and binary are not plain data.
    PlainDataLoader.add_constructor(
        "tag:yaml.org,2002:timestamp", PlainDataLoader.construct_date_as_text
    )
    for tag in ("set", "omap", "pairs", "binary"):
        PlainDataLoader.add_constructor(f"tag:yaml.org,2002:{tag}", PlainDataLoader.refuse_tag)
    PlainDataLoader.add_constructor("tag:yaml.org,2002:int", PlainDataLoader.construct_bounded_int)
    PlainDataLoader.add_constructor(
        "tag:yaml.org,2002:float", PlainDataLoader.construct_finite_float
    )
    return PlainDataLoader


def load_yaml(text: str, *, origin: str, max_depth: int = MAX_YAML_DEPTH) -> Any:
    """Parse one YAML document of plain data (see the module docstring for what is refused);
    any problem is one ``InvalidInput`` line starting with ``origin``."""
    import yaml

    loader = None
    try:
        loader = _loader_class()(text)
        loader.max_depth = max_depth
        return loader.get_single_data()
    except _Refused as exc:
        raise InvalidInput(f"{origin}: {exc}") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        what = ", ".join(filter(None, (exc.context, exc.problem))) or "syntax error"
        raise InvalidInput(f"{origin}: not valid YAML: {for_terminal(what)}{where}") from None
    except (yaml.YAMLError, RecursionError, ValueError, OverflowError, TypeError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InvalidInput(f"{origin}: not valid YAML: {for_terminal(first)}") from None
    finally:
        if loader is not None:
            loader.dispose()


def read_yaml_file(
    path: Path, *, max_bytes: int, what: str = "YAML file", max_depth: int = MAX_YAML_DEPTH
) -> Any:
    """Read a UTF-8 YAML file of at most ``max_bytes`` and parse it with ``load_yaml``."""
    data = read_bounded(path, max_bytes=max_bytes, what=what)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidArtifact(path, f"{what} is not UTF-8 text (byte {exc.start})") from None
    return load_yaml(text, origin=str(path), max_depth=max_depth)
