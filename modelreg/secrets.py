"""Secrets are never shown: key material, tokens and passwords are hidden from every error
message, log line and JSON error body.

Two depths. At the source, code that holds a secret never quotes it: ``signing`` reads a
PEM in MODELREG_SIGNING_KEY as the key (errors name the variable, not its value) instead of
taking it for a file name, and refuses key material given as a path without quoting it; a
``token_env`` that is no variable name, or looks like a token, is not quoted (it is usually
the token itself); the OpenAI-compatible client hides its own token in whatever the server
sends back. And a last
line of defence, ``redact_secrets``: every ``ModelregError`` passes its message and hint
through it when it is made — so the CLI and the HTTP server, which both show
``exc.message`` and ``exc.hint``, show the redacted text — and the CLI passes every line it
writes to stderr and every JSON error through it again.

``redact_secrets`` replaces with ``[REDACTED]``:

- PEM blocks: ``-----BEGIN …`` through ``-----END …-----``, or through the end of the text
  when the block was cut short;
- the value of ``MODELREG_SIGNING_KEY`` when it holds key material rather than a path (a path
  is not secret, and the message must say which file was meant);
- the values of the environment variables a target names in ``token_env`` (noted whenever a
  target is read, and found in the targets file by the CLI before it shows an error) when they
  are at least ``MIN_SECRET_CHARS`` long — shorter ones would hide ordinary words;
- of those values, also any 16 characters of one together (a message that quotes the start
  of a value, one line of a key);
- modelreg API token secrets (``mr_…``, see ``modelreg.tokens``) and ``Bearer`` credentials;

and, through ``modelreg.urls.redact_text``, with ``***``: the password of a URL's userinfo,
secret-looking query parameters and ``password=…`` keywords — here also in a URL written
without its scheme (``admin:pw@db.example.com/registry``).

It never raises, and when unsure it hides more, never less. Standard library only.
"""

from __future__ import annotations

import os
import re
import stat
import threading
from collections.abc import Iterable
from pathlib import Path, PurePath

REDACTED = "[REDACTED]"
SIGNING_KEY_ENV = "MODELREG_SIGNING_KEY"
MIN_SECRET_CHARS = 8  # shorter environment values are not taken for secrets
_MIN_PIECE_CHARS = 16  # this many characters of a known secret, together, are hidden
_MAX_TARGETS_SCAN_BYTES = 1 << 20

# A PEM block, in raw text or escaped (repr, for_terminal: "\\n" for the newlines); one cut
# short (a truncated message) is hidden to the end of the text.
_PEM_RE = re.compile(r"-{2,} ?BEGIN\b.*?(?:-{2,} ?END\b[^\n-]{0,80}-{2,}|\Z)", re.S)
# Key material given without its armour: base64 DER ("MIG…"), 64 characters or more.
_BARE_KEY_RE = re.compile(r"[A-Za-z0-9+][A-Za-z0-9+/]{63,}={0,2}")
_API_TOKEN_RE = re.compile(r"(?<![A-Za-z0-9_-])mr_[A-Za-z0-9_-]{16,}")
_BEARER_RE = re.compile(r"(?i)\b(bearer)(\s+)[A-Za-z0-9._~+/=-]{16,}")
# user:password@host without a scheme (the scheme form is modelreg.urls'); an image
# reference's ``repo:tag@sha256:…`` is not one.
_SCHEMELESS_USERINFO_RE = re.compile(
    r"(?<![\w.%+-])([A-Za-z0-9._%+-]+):(?!//)([^\s'\"<>]+)@(?!sha\d+:|md5:)(?=[A-Za-z0-9\[])"
)
_TOKEN_ENV_IN_FILE_RE = re.compile(r"\btoken_env['\"]?\s*:\s*['\"]?([A-Za-z_][A-Za-z0-9_]{0,127})")

_lock = threading.Lock()
_token_envs: set[str] = set()


def looks_like_key_material(value: str) -> bool:
    """Whether ``value`` is a key itself rather than the path of a key file: it spans several
    lines, holds PEM armour, or is one long run of base64."""
    if "\n" in value or "\r" in value or ("BEGIN" in value and "-----" in value):
        return True
    return _BARE_KEY_RE.fullmatch(value.strip()) is not None and "//" not in value


def note_token_env(name: str | None) -> None:
    """Remember that the environment variable ``name`` holds a bearer token (a target's
    ``token_env``): its value is hidden from then on."""
    if name:
        with _lock:
            _token_envs.add(name)


def note_token_envs_in_file(path: Path) -> None:
    """Note every ``token_env`` a targets file names, without parsing it (it may be the very
    file an error is about). Never raises."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError):
        return
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # a FIFO or device: never read
            return
        data = os.read(fd, _MAX_TARGETS_SCAN_BYTES)
    except OSError:
        return
    finally:
        os.close(fd)
    text = data.decode("utf-8", errors="replace")
    for match in _TOKEN_ENV_IN_FILE_RE.finditer(text):
        note_token_env(match.group(1))


def secret_values() -> list[str]:
    """The secrets held in the environment right now (see the module docstring)."""
    values = []
    key = os.environ.get(SIGNING_KEY_ENV, "")
    # Hidden also when it is read as a path: a long run of base64 with a "//" in it is taken
    # for a file name, yet a random key body holds "//" about one time in twenty.
    maybe_key = _BARE_KEY_RE.fullmatch(key.strip()) is not None
    if len(key) >= MIN_SECRET_CHARS and (looks_like_key_material(key) or maybe_key):
        values.append(key)
    with _lock:
        names = sorted(_token_envs)
    for name in names:
        value = os.environ.get(name, "")
        if len(value.strip()) >= MIN_SECRET_CHARS:
            values.append(value)
    return values


def _forms(values: Iterable[str]) -> set[str]:
    """Every way a secret may be written into a message: as is, stripped, without its line
    breaks, as a path (code that took it for a file name shows "//" as "/"), quoted by
    ``repr``, escaped for a terminal."""
    from modelreg.textsafe import for_terminal

    forms: set[str] = set()
    for value in values:
        joined = "".join(value.split())  # a key's body with its line breaks taken out
        for form in (value, value.strip(), joined, str(PurePath(value)), repr(value)[1:-1]):
            forms.update(shown for shown in (form, for_terminal(form)) if shown.strip())
    return forms


def _common_runs(text: str, secret: str) -> list[tuple[int, int]]:
    """The spans of ``text`` that are ``_MIN_PIECE_CHARS`` or more characters of ``secret``.

    Every such run holds one of the secret's aligned half-length pieces (at offsets 0, h,
    2h… for h = half the minimum), so only those are searched for, and each hit is grown as
    far as text and secret agree: a few searches per secret, whatever the text's length."""
    half = _MIN_PIECE_CHARS // 2
    runs = []
    for k in range(0, len(secret) - half + 1, half):
        anchor = secret[k : k + half]
        at = text.find(anchor)
        while at >= 0:
            left = 0
            while left < min(at, k) and text[at - left - 1] == secret[k - left - 1]:
                left += 1
            right = at + half
            while (
                right < len(text)
                and k + right - at < len(secret)
                and text[right] == secret[k + right - at]
            ):
                right += 1
            if right - (at - left) >= _MIN_PIECE_CHARS:
                runs.append((at - left, right))
            at = text.find(anchor, at + 1)
    return runs


def _hide_known(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every known secret hidden: a short one (under ``_MIN_PIECE_CHARS``) where
    it appears whole, a longer one wherever ``_MIN_PIECE_CHARS`` or more characters of it
    appear together — a message that quotes only the start of a value (cut at 40 or 80
    characters), or one line of a key, hides that part too."""
    spans: list[tuple[int, int]] = []
    for secret in _forms(secrets):
        if len(secret) < _MIN_PIECE_CHARS:
            at = text.find(secret)
            while at >= 0:
                spans.append((at, at + len(secret)))
                at = text.find(secret, at + 1)
        else:
            spans.extend(_common_runs(text, secret))
    if not spans:
        return text
    spans.sort()
    out: list[str] = []
    shown_to = 0
    end = -1
    for start, stop in spans:
        if start > end:  # a new run of hidden characters
            if end >= 0:
                out.append(REDACTED)
            out.append(text[shown_to:start])
        end = max(end, stop)
        shown_to = end
    out.append(REDACTED)
    out.append(text[shown_to:])
    return "".join(out)


def redact_secrets(text: str, extra: Iterable[str] = ()) -> str:
    """``text`` with every secret hidden (see the module docstring); ``extra``: more secret
    values to hide (a client's own token), at least ``MIN_SECRET_CHARS`` long."""
    from modelreg.urls import HIDDEN, redact_text

    try:
        text = str(text)
        known = [v for v in extra if v and len(v) >= MIN_SECRET_CHARS]
        text = _hide_known(text, [*known, *secret_values()])
        text = _PEM_RE.sub(REDACTED, text)
        text = _API_TOKEN_RE.sub(REDACTED, text)
        text = _BEARER_RE.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
        text = redact_text(text)
        return _SCHEMELESS_USERINFO_RE.sub(lambda m: f"{m.group(1)}:{HIDDEN}@", text)
    except Exception:  # pragma: no cover - a last line of defence must not become the error
        return REDACTED
