"""Text from artifacts and users, made safe to show (placeholder until the hostile-input
round lands: control characters escaped)."""

from __future__ import annotations


def for_terminal(text: str) -> str:
    """Control characters (C0, C1, DEL) shown escaped, so one record stays one line."""
    out = []
    for ch in text:
        code = ord(ch)
        if code < 0x20 or 0x7F <= code < 0xA0:
            out.append(ch.encode("unicode_escape").decode("ascii"))
        else:
            out.append(ch)
    return "".join(out)
