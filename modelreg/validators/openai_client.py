"""A small client for OpenAI-compatible servers (llama.cpp's llama-server, ik_llama.cpp, vLLM,
TGI, llama-cpp-python's server): JSON probes and streamed generations, with timeouts, bounded
retries and a bearer token that only ever travels in a header.

Every failure to talk to the server is an ``EndpointUnavailable`` (could not run: refused,
unreachable, DNS, HTTP errors, a broken stream) or an ``EndpointTimeout`` (the server took
the connection but did not answer in time); the check turns them into outcomes, never a pass.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from modelreg.jsonio import parse_json
from modelreg.secrets import redact_secrets

CONNECT_TIMEOUT_SECONDS = 5.0
RETRIES = 2  # attempts after the first, for connection failures and 502 / 503 / 504
RETRY_BACKOFF_SECONDS = 0.2
RETRY_STATUSES = frozenset({502, 503, 504})
MAX_BODY_BYTES = 1 << 20
MAX_OUTPUT_CHARS = 100_000
ERROR_BODY_CHARS = 300


class EndpointUnavailable(Exception):
    """The server could not be asked (refused, unreachable, HTTP error, broken stream)."""


class EndpointRejected(EndpointUnavailable):
    """The server refused the request itself (HTTP 400 / 422): e.g. a parameter it does not
    know."""


class EndpointTimeout(Exception):
    """The server did not answer within the time left."""


@dataclass
class Answer:
    """One generation as the server streamed it."""

    text: str
    finish_reason: str | None
    model: str | None
    prompt_tokens: int | None
    completion_tokens: int | None  # the server's usage, else the chunks that carried text
    tokens_from: str  # "usage" or "chunks"
    ttft_ms: float | None  # request sent → first text
    decode_ms: float | None  # first text → last text
    wall_ms: float
    streamed: bool
    truncated: bool = False
    server_timings: dict[str, Any] | None = None  # llama-server's per-request timings


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


@dataclass
class OpenAIClient:
    base_url: str
    token: str | None
    deadline: float  # time.monotonic() after which nothing more is asked
    trust_env: bool = True  # proxies from the environment; off for loopback servers
    log: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        import httpx

        headers = {"Accept": "application/json, text/event-stream"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        self.http = httpx.Client(
            base_url=self.base_url,
            headers=headers,
            timeout=httpx.Timeout(60.0, connect=CONNECT_TIMEOUT_SECONDS),
            follow_redirects=False,  # a redirect is a misconfiguration, and could move the token
            trust_env=self.trust_env,
            # Loading the CA bundle costs ~20 ms per client; a plain-http URL never uses TLS
            # (redirects are not followed), so it skips that. https verifies as usual.
            verify=not self.base_url.startswith("http://"),
        )

    def close(self) -> None:
        self.http.close()

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def _timeout(self) -> Any:
        import httpx

        left = self.remaining()
        if left <= 0:
            raise EndpointTimeout("no time left for another request")
        return httpx.Timeout(left, connect=min(CONNECT_TIMEOUT_SECONDS, left))

    def _note(self, method: str, path: str, status: int | str, started: float) -> None:
        self.log.append(
            {
                "request": f"{method} {path}",
                "status": status,
                "ms": round((time.perf_counter() - started) * 1000, 2),
            }
        )

    def _redact(self, text: str) -> str:
        """``text`` from the server or the HTTP stack with every secret hidden, this client's
        own token first (a server may echo the request's headers)."""
        return redact_secrets(text, [self.token] if self.token else [])

    def _failed(self, method: str, path: str, exc: Exception) -> EndpointUnavailable:
        detail = self._redact(str(exc)).splitlines()[0] if str(exc) else ""
        return EndpointUnavailable(
            f"{method} {self.base_url}{path}: {type(exc).__name__}"
            + (f": {detail}" if detail else "")
        )

    def get_json(self, path: str) -> tuple[int, Any]:
        """(status, parsed JSON or None). 404 and other client errors are answers (the server
        has no such endpoint); connection failures and 5xx after the retries are not."""
        import httpx

        for attempt in range(RETRIES + 1):
            started = time.perf_counter()
            try:
                response = self.http.get(path, timeout=self._timeout())
                body = response.content[:MAX_BODY_BYTES]
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                self._note("GET", path, type(exc).__name__, started)
                if attempt < RETRIES and self._pause(attempt):
                    continue
                raise self._failed("GET", path, exc) from None
            except httpx.TimeoutException as exc:
                raise EndpointTimeout(
                    f"GET {path}: no answer in time ({type(exc).__name__})"
                ) from None
            except httpx.HTTPError as exc:
                raise self._failed("GET", path, exc) from None
            self._note("GET", path, response.status_code, started)
            if (
                response.status_code in RETRY_STATUSES
                and attempt < RETRIES
                and self._pause(attempt)
            ):
                continue
            if response.status_code >= 500 or response.status_code in (401, 403, 407):
                raise EndpointUnavailable(self._http_error("GET", path, response.status_code, body))
            if 300 <= response.status_code < 400:
                raise EndpointUnavailable(
                    f"GET {path}: redirected (HTTP {response.status_code}) to "
                    f"{self._redact(response.headers.get('location', '?'))}; give the final URL"
                )
            if response.status_code != 200:
                return response.status_code, None
            try:
                return 200, parse_json(body)
            except ValueError:
                return 200, None
        raise AssertionError("unreachable")

    def _pause(self, attempt: int) -> bool:
        """Sleep before a retry, if there is time for it."""
        pause = RETRY_BACKOFF_SECONDS * (2**attempt)
        if self.remaining() <= pause:
            return False
        time.sleep(pause)
        return True

    def _http_error(self, method: str, path: str, status: int, body: bytes) -> str:
        text = self._redact(body.decode("utf-8", errors="replace")).strip()
        text = " ".join(text.split())[:ERROR_BODY_CHARS]
        why = {401: " (the token was refused or is missing)", 403: " (forbidden)"}.get(status, "")
        return f"{method} {self.base_url}{path}: HTTP {status}{why}" + (f": {text}" if text else "")

    def generate(self, path: str, body: dict[str, Any], chat: bool) -> Answer:
        """POST a streamed completion; read it into one ``Answer``."""
        import httpx

        for attempt in range(RETRIES + 1):
            started = time.perf_counter()
            try:
                with self.http.stream("POST", path, json=body, timeout=self._timeout()) as response:
                    status = response.status_code
                    if status != 200:
                        error = b"".join(response.iter_bytes())[:MAX_BODY_BYTES]
                        self._note("POST", path, status, started)
                        if status in RETRY_STATUSES and attempt < RETRIES and self._pause(attempt):
                            continue
                        message = self._http_error("POST", path, status, error)
                        if status in (400, 422):
                            raise EndpointRejected(message)
                        raise EndpointUnavailable(message)
                    answer = self._read(response, started, chat)
                    self._note("POST", path, status, started)
                    return answer
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                self._note("POST", path, type(exc).__name__, started)
                if attempt < RETRIES and self._pause(attempt):
                    continue
                raise self._failed("POST", path, exc) from None
            except httpx.TimeoutException as exc:
                raise EndpointTimeout(
                    f"POST {path}: no complete answer within the time left ({type(exc).__name__})"
                ) from None
            except httpx.HTTPError as exc:
                raise self._failed("POST", path, exc) from None
        raise AssertionError("unreachable")

    def _read(self, response: Any, started: float, chat: bool) -> Answer:
        pieces: list[str] = []
        first_at = last_at = None
        finish_reason = model = None
        usage: dict[str, Any] = {}
        timings = None
        chunks = 0
        size = 0
        truncated = False
        streamed = "text/event-stream" in response.headers.get("content-type", "")
        if streamed:
            documents = self._events(response)
        else:
            raw = b""
            for part in response.iter_bytes():
                raw += part
                if len(raw) > MAX_BODY_BYTES:
                    raise EndpointUnavailable("answer larger than 1 MiB")
            documents = iter([self._parse(raw)])
        for document in documents:
            if not isinstance(document, dict):
                continue
            if document.get("error"):
                raise EndpointUnavailable(
                    "the server reported an error: "
                    + self._redact(str(document["error"]))[:ERROR_BODY_CHARS]
                )
            model = model or (
                document.get("model") if isinstance(document.get("model"), str) else None
            )
            if isinstance(document.get("usage"), dict):
                usage = document["usage"]
            if isinstance(document.get("timings"), dict):
                timings = document["timings"]
            for choice in document.get("choices") or []:
                if not isinstance(choice, dict):
                    continue
                if chat:
                    holder = choice.get("delta") if streamed else choice.get("message")
                    text = holder.get("content") if isinstance(holder, dict) else None
                else:
                    text = choice.get("text")
                if isinstance(text, str) and text:
                    now = time.perf_counter()
                    first_at = first_at or now
                    last_at = now
                    pieces.append(text)
                    chunks += 1
                    size += len(text)
                if choice.get("finish_reason"):
                    finish_reason = str(choice["finish_reason"])[:40]
            if size > MAX_OUTPUT_CHARS:
                truncated = True
                break
        usage_tokens = _int(usage.get("completion_tokens"))
        return Answer(
            text="".join(pieces)[:MAX_OUTPUT_CHARS],
            finish_reason=finish_reason,
            model=model[:1000] if model else None,
            prompt_tokens=_int(usage.get("prompt_tokens")),
            completion_tokens=usage_tokens
            if usage_tokens is not None
            else (chunks if streamed else None),
            tokens_from="usage" if usage_tokens is not None else "chunks",
            ttft_ms=round((first_at - started) * 1000, 2) if streamed and first_at else None,
            decode_ms=round((last_at - first_at) * 1000, 2)
            if streamed and first_at and last_at
            else None,
            wall_ms=round((time.perf_counter() - started) * 1000, 2),
            streamed=streamed,
            truncated=truncated,
            server_timings=timings,
        )

    def _events(self, response: Any) -> Any:
        """The JSON documents of a server-sent event stream, up to ``[DONE]``."""
        for line in response.iter_lines():
            if not line.startswith("data:"):
                continue
            data = line[len("data:") :].strip()
            if data == "[DONE]":
                return
            if data:
                yield self._parse(data)

    @staticmethod
    def _parse(data: str | bytes) -> Any:
        try:
            return parse_json(data)
        except ValueError as exc:
            raise EndpointUnavailable(f"not an OpenAI-compatible answer: {exc}") from None
