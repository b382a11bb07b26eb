"""The house rules a newcomer can rely on (issue 43): no room of the library over 800 lines.
The layering and the import cycles are import-linter's (pyproject.toml, `make structure`),
dead code is vulture's; this is the size, which neither tool checks."""

from __future__ import annotations

from pathlib import Path

ROOM_MAX_LINES = 800
LIBRARY = Path(__file__).resolve().parent.parent / "modelreg"


def test_no_module_of_the_library_is_over_800_lines() -> None:
    sizes = {
        path.relative_to(LIBRARY.parent).as_posix(): len(path.read_bytes().splitlines())
        for path in sorted(LIBRARY.rglob("*.py"))
    }
    assert len(sizes) > 100, sorted(sizes)  # the library, not an empty glob
    over = {name: lines for name, lines in sizes.items() if lines > ROOM_MAX_LINES}
    assert not over, f"split by what they are about: {over}"
