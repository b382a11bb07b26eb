"""Bodies bounded by what arrives (issue 22), against a real uvicorn on loopback: a request
framed by both Content-Length and Transfer-Encoding is refused; no body is read before the
caller is known to be allowed to write; a body that trickles in is cut off at a deadline."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable
from urllib.parse import urlsplit

import httpx
import pytest

from modelreg.server.guard import Guard
from tests.helpers import stored
from tests.server.conftest import Served

Clients = Callable[[str | None], httpx.Client]


def _raw(served: Served, request: bytes, then: bytes = b"", wait: float = 5.0) -> bytes:
    """Send raw bytes, read what the server answers within ``wait`` seconds."""
    address = urlsplit(served.url)
    with socket.create_connection((address.hostname, address.port), timeout=wait) as sock:
        sock.sendall(request)
        if then:
            sock.sendall(then)
        answer = b""
        deadline = time.monotonic() + wait
        while b"\r\n\r\n" not in answer and time.monotonic() < deadline:
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                break
            if not chunk:
                break
            answer += chunk
        return answer


def _status(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else 0


def test_content_length_with_transfer_encoding_is_refused(served: Served, tokens: dict) -> None:
    body = b"5\r\nhello\r\n0\r\n\r\n"
    request = (
        b"POST /api/v1/records HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Authorization: Bearer " + tokens["verifier"].encode() + b"\r\n"
        b"Content-Length: 10\r\nTransfer-Encoding: chunked\r\n\r\n" + body
    )
    answer = _raw(served, request)
    assert _status(answer) == 400, answer  # before: h11 read the whole chunked body


def test_no_body_is_read_before_the_caller_may_write(served: Served, tokens: dict) -> None:
    """A 300 MB body announced without a token (or with a reader's): answered at once from
    the headers, before a byte of the body is sent."""
    head = b"POST /api/v1/records HTTP/1.1\r\nHost: x\r\nContent-Length: 314572800\r\n"
    for authorization, status in (
        (b"", 401),
        (b"Authorization: Bearer " + tokens["reader"].encode() + b"\r\n", 403),
    ):
        started = time.monotonic()
        answer = _raw(served, head + authorization + b"\r\n")
        assert _status(answer) in (status, 413), answer  # 413 when over the limit first
        assert time.monotonic() - started < 4
    small = b"POST /api/v1/records HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n"
    for authorization, status in (
        (b"", 401),
        (b"Authorization: Bearer " + tokens["reader"].encode() + b"\r\n", 403),
    ):
        answer = _raw(served, small + authorization + b"\r\n")
        assert _status(answer) == status, answer


def test_a_trickling_body_is_cut_off(
    served: Served, tokens: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(Guard, "BODY_SECONDS", 1.0)
    request = (
        b"POST /api/v1/records HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Authorization: Bearer " + tokens["verifier"].encode() + b"\r\n"
        b"Content-Length: 100\r\n\r\n{"
    )
    started = time.monotonic()
    answer = _raw(served, request, wait=10)
    assert _status(answer) == 408, answer
    assert time.monotonic() - started < 8


def test_a_writer_still_posts(served: Served, client_of: Clients) -> None:
    from tests.helpers import synthetic_manifest

    manifest = synthetic_manifest(3)
    body = {"schema_version": 1, "record_id": manifest.record_id, "manifest": manifest.model_dump()}
    response = client_of("verifier").post("/api/v1/records", json=body)
    assert response.status_code == 201, response.text


def test_smaller_doors(served: Served, client_of: Clients) -> None:
    reader = client_of("reader")
    huge = reader.get("/?offset=9223372036854775808")
    assert huge.status_code == 422, huge.text  # before: 500
    not_json = client_of("verifier").post(
        "/api/v1/records", content=b"{not json", headers={"Content-Type": "application/json"}
    )
    assert not_json.status_code in (400, 422), not_json.text
    assert not_json.json()["error"]["code"] == "invalid_input"
    spec = reader.get("/api/v1/openapi.json").json()
    show = spec["paths"]["/api/v1/records/{record_id}"]["get"]
    (param,) = [p for p in show["parameters"] if p["name"] == "record_id"]
    assert param["schema"]["pattern"] == "^(r_[0-9a-f]{4,30}|[0-9a-f]{4,32})$"
    assert param["schema"]["maxLength"] == 32
    listing = spec["paths"]["/api/v1/records"]["get"]
    (state,) = [p for p in listing["parameters"] if p["name"] == "state"]
    assert "held" in json.dumps(state["schema"])
    assert "400" in spec["paths"]["/api/v1/records"]["post"]["responses"]


def test_login_needs_its_own_form_and_cookies_are_secure_over_https(
    served: Served, tokens: dict
) -> None:
    import re

    with httpx.Client(base_url=served.url, timeout=30) as browser:
        forged = browser.post("/login", data={"token": tokens["reader"], "next": "/"})
        assert forged.status_code == 403 and "another site" in forged.text  # login CSRF
        form = browser.get("/login")
        csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
        assert csrf is not None
        signed_in = browser.post(
            "/login",
            data={"token": tokens["reader"], "next": "/", "csrf": csrf.group(1)},
            headers={"X-Forwarded-Proto": "https"},  # from 127.0.0.1: a proxy uvicorn trusts
        )
        assert signed_in.status_code == 303, signed_in.text
        cookie = signed_in.headers["set-cookie"]
        assert "modelreg_token=" in cookie and "Secure" in cookie and "HttpOnly" in cookie


def test_trickled_headers_are_cut_off(served: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    """A client that sends its headers a byte at a time (uvicorn's keep-alive timer restarts
    on every byte) loses the connection at the header deadline."""
    from modelreg.server.protocol import NoDelayH11Protocol

    monkeypatch.setattr(NoDelayH11Protocol, "HEADER_SECONDS", 1.0)
    address = urlsplit(served.url)
    started = time.monotonic()
    with socket.create_connection((address.hostname, address.port), timeout=10) as sock:
        sock.sendall(b"GET /api/v1/status HTTP/1.1\r\nHost: x\r\n")
        closed = False
        for _ in range(20):
            try:
                sock.sendall(b"X")
                time.sleep(0.25)
                if sock.recv(1, socket.MSG_DONTWAIT) == b"":
                    closed = True
                    break
            except BlockingIOError:
                continue
            except OSError:
                closed = True
                break
    assert closed and time.monotonic() - started < 4
    with httpx.Client(base_url=served.url, timeout=10) as client:  # others are served
        assert client.get("/api/v1/status").status_code == 401


def test_uploaded_text_cannot_reorder_a_page(served: Served, client_of: Clients) -> None:
    """An uploaded host and evidence string with ESC/OSC and a bidi override reach the record
    page escaped, not raw."""
    from tests.helpers import PASSING, add_synthetic

    record = add_synthetic(served.registry, 1)
    hostile = "gpu\x1b]0;owned\x07box\u202etxt.exe"
    now = "2026-01-01T00:00:00Z"
    run = {
        "target": "cpu",
        "host": hostile,
        "fingerprint": {"llama-cpp-python": "0.3.36"},
        "checks": [
            {
                "check": c,
                "required": True,
                "outcome": "pass",
                "summary": hostile,
                "started_at": now,
                "finished_at": now,
            }
            for c in PASSING
        ],
    }
    assert client_of("verifier").post(f"/api/v1/records/{record}/runs", json=run).status_code == 201
    page = client_of("reader").get(f"/records/{record}")
    assert page.status_code == 200
    assert "\u202e" not in page.text and "\x1b" not in page.text and "\x07" not in page.text
    assert "\\u202e" in page.text and "\\x1b" in page.text


def test_json_escapes_what_would_reorder_a_terminal(served: Served, client_of: Clients) -> None:
    from tests.helpers import add_synthetic, record_run

    record = add_synthetic(served.registry, 1)
    record_run(served.registry, record)
    served.registry.hold(record, "why\u202eoverride\x85")
    response = client_of("reader").get(f"/api/v1/records/{record}")
    assert "\u202e" not in response.text and "\x85" not in response.text
    assert "\\u202e" in response.text
    assert response.json()["record"]["state"]["reason"] == "why\u202eoverride\x85"


def test_bodies_of_anyone_are_small_and_gets_carry_none(served: Served, tokens: dict) -> None:
    big = b"POST /logout HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n" + b"a" * 65536
    assert _status(_raw(served, big)) == 413  # before: 16 MiB read for anyone
    get = (
        b"GET /api/v1/status HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
        b"Authorization: Bearer " + tokens["reader"].encode() + b"\r\n\r\nhello"
    )
    assert _status(_raw(served, get)) == 400


def test_a_nul_is_refused_at_the_door(served: Served, client_of: Clients) -> None:
    from tests.helpers import add_synthetic

    record = add_synthetic(served.registry, 1)
    held = client_of("releaser").post(f"/api/v1/records/{record}/hold", json={"why": "a\x00b"})
    assert held.status_code == 422, held.text  # before: 500 on PostgreSQL, stored on SQLite
    assert stored(served.registry).state(record).state.value == "active"
