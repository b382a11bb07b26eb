"""The two reads a deploy pipeline asks most — ``GET /api/v1/status`` and ``GET /api/v1/gate``
— answered in the event loop from the registry's derivations, past the framework.

Only the plain form of each is answered here: known parameters, each once, of a valid length,
and a caller the same ``authorize`` accepts. Anything else — a missing or bad parameter, a
refused token, an unknown model — is handed to the FastAPI app, which answers it as it answers
every request (the same status, body and headers: this path is a shortcut, never a second
implementation of an answer). The library calls are the ones the app's endpoints make, and
they read the registry on every request (the generations, the token): a write or a revoked
token counts from the next request, as on the app's path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import parse_qsl

from modelreg.server.auth import authorize, bearer_secret
from modelreg.tokens import Permission

if TYPE_CHECKING:
    from starlette.types import Scope, Send

    from modelreg.api import Registry

API = "/api/v1"
# path -> (the parameters it takes, those it needs)
_PARAMETERS: dict[str, tuple[set[str], set[str]]] = {
    f"{API}/status": ({"model", "target"}, set()),
    f"{API}/gate": ({"model", "target", "sha256"}, {"model", "target", "sha256"}),
}
MAX_TEXT = 200  # the app's Query(max_length=200)


class FastReads:
    """Answers the plain status and gate requests (``answer``: False hands one to the app)."""

    def __init__(self, registry: Registry, public_read: bool) -> None:
        self.registry = registry
        self.public_read = public_read

    def _query(self, scope: Scope) -> dict[str, str] | None:
        known, required = _PARAMETERS[scope["path"]]
        pairs = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        query = dict(pairs)
        if len(query) != len(pairs) or not set(query) <= known or not required <= set(query):
            return None
        if any(not 1 <= len(v) <= MAX_TEXT for v in query.values()):
            return None
        return query

    def _secret(self, scope: Scope) -> str | None:
        found = [v for k, v in scope["headers"] if k == b"authorization"]
        if len(found) > 1:
            raise LookupError("two Authorization headers: the app decides")
        return bearer_secret(found[0].decode("latin-1")) if found else None

    def _body(self, scope: Scope, query: dict[str, str]) -> tuple[int, str] | None:
        """(status, JSON) of a plain request; None hands it to the app (an error of any kind:
        the app answers it as it answers every request — 4xx, or 503 for a database that
        cannot be reached)."""
        try:
            authorize(
                self.registry,
                self._secret(scope),
                Permission.READ,
                public_read=self.public_read,
            )
            if scope["path"].endswith("/gate"):
                gate = self.registry.gate(query["model"], query["target"], query["sha256"])
                from modelreg.textsafe import for_json

                return (200 if gate.passed else 409), for_json(gate.model_dump_json())
            return 200, self.registry.status_json(query.get("model"), query.get("target"))
        except Exception:  # nothing is sent yet: the app answers, or reports, it
            return None

    def _derived(self, scope: Scope, query: dict[str, str]) -> tuple[int, str] | None:
        """The answer from what this process has derived, checked by one statement on the
        event loop's own connection (``Store.peek``); None: read it in full, in a thread."""
        model = query.get("model")
        if model is None:
            return None
        try:
            secret = self._secret(scope)
            named, models = self.registry.store.peek([model], pinned=True)
        except Exception:
            return None
        if secret is None:
            if not self.public_read:
                return None
        else:
            from modelreg.tokens import ROLE_PERMISSIONS, Role

            token = self.registry.known_token(secret, named)
            if token is None or Permission.READ not in ROLE_PERMISSIONS[Role(token.role)]:
                return None
        return self.registry.derived_read(
            model, query.get("target"), query.get("sha256"), (named, models)
        )

    async def answer(self, scope: Scope, send: Send) -> bool:
        if scope.get("method") != "GET" or scope.get("path") not in _PARAMETERS:
            return False
        query = self._query(scope)
        if query is None:
            return False
        # What is derived and current is answered here, in the event loop (one round trip to
        # the database); anything else in a worker thread, as the app's endpoints run: a read
        # that has to derive, or a database slow to answer, holds up that request only.
        answered = self._derived(scope, query)
        if answered is None:
            import anyio.to_thread

            answered = await anyio.to_thread.run_sync(self._body, scope, query)
        if answered is None:
            return False
        status, body = answered
        data = body.encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-length", str(len(data)).encode()),
                    (b"content-type", b"application/json"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": data})
        return True
