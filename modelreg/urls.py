"""Secrets in URLs, hidden before a URL is shown anywhere (messages, logs, JSON errors).

Database URLs carry passwords in the userinfo (``postgresql://user:pw@host/db``) and in query
parameters (``?password=…``, ``sslpassword=…``), and users type them unencoded
(``user:p@ss/w?rd@host``), so ``redact_url`` works on the text rather than on a parse that may
fail or split in the wrong place: it never raises, and when unsure it hides more, never less.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

HIDDEN = "***"
# Query keys whose values are secrets, or say where one is (passfile, sslkey): hidden.
_SECRET_KEY_RE = re.compile(r"pass|pwd|secret|token|key|auth|credential|signature", re.I)
# A scheme is short (bounded: an unbounded one made a long run of letters quadratic).
_URL_IN_TEXT_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]{0,31}://[^\s'\"<>]+")
# The digest after "@" in "oci://host/repo@sha256:<hex>" (not a host).
_DIGEST_RE = re.compile(r"(?:sha256|sha384|sha512):[0-9a-fA-F]{32,}(?![0-9a-fA-F])")
# libpq key=value strings ("host=db password=s3cret") and the like, in free text.
_KEYWORD_SECRET_RE = re.compile(
    r"(?i)\b([\w-]{0,64}?(?:password|passwd|pwd|secret|token)[\w-]{0,64})(\s*=\s*)"
    r"('[^']*'|\"[^\"]*\"|[^\s&;,]+)"
)


def _redact_query(query: str) -> str:
    parts = re.split(r"([&;])", query)
    for i in range(0, len(parts), 2):
        key, sep, value = parts[i].partition("=")
        if sep and value and _SECRET_KEY_RE.search(unquote(key)):
            parts[i] = f"{key}={HIDDEN}"
    return "".join(parts)


def redact_url(url: str) -> str:
    """``url`` with the password of its userinfo and every secret-looking query parameter
    replaced by ``***``; the scheme, user, host, port, path and other parameters stay, so the
    message still says which database was meant.

    The userinfo ends at the last ``@`` (not counting an ``@sha256:…`` digest pin), so
    unencoded ``@``, ``/``, ``?``, ``#`` and ``:`` in a password stay hidden.
    """
    scheme_end = url.find("://")
    if scheme_end < 0:
        head, rest = "", url
    else:
        head, rest = url[: scheme_end + 3], url[scheme_end + 3 :]
    # A password may hold any character, a host none of "@/?#": the userinfo ends at the last
    # "@". (An "@" in a query value hides the host too: more than needed, never less.)
    at = rest.rfind("@")
    # ...except the "@sha256:<hex>" that pins an OCI reference to a digest (no password is
    # followed by a 32-hex-digit "port"): the userinfo, if any, ends before it.
    while at >= 0 and _DIGEST_RE.match(rest, at + 1):
        at = rest.rfind("@", 0, at)
    if scheme_end >= 0 and at >= 0:
        userinfo, rest = rest[:at], rest[at:]
        user, colon, _password = userinfo.partition(":")
        if colon:
            userinfo = f"{user}:{HIDDEN}"
        head += userinfo
    path, question, query = rest.partition("?")
    if question:
        query, hash_, fragment = query.partition("#")
        rest = f"{path}?{_redact_query(query)}{hash_}{fragment}"
    return head + rest


def redact_text(text: str) -> str:
    """``text`` (an exception message, a log line) with every URL in it passed through
    ``redact_url`` and every ``password=…``-like keyword value hidden."""
    if "://" in text:
        text = _URL_IN_TEXT_RE.sub(lambda m: redact_url(m.group(0)), text)
    if "=" not in text:  # no keyword=value to hide (and no scan of a long text for one)
        return text
    return _KEYWORD_SECRET_RE.sub(
        lambda m: m.group(0) if m.group(3) == HIDDEN else f"{m.group(1)}{m.group(2)}{HIDDEN}",
        text,
    )
