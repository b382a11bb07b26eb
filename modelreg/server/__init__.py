"""``modelreg serve``: the registry over HTTP — a JSON API under ``/api/v1`` and a
server-rendered dashboard — as a thin adapter over ``modelreg.api.Registry``.

Every endpoint parses its input, calls one Registry method, and returns the same pydantic output
model ``--json`` prints; errors are ``modelreg.errors`` mapped to HTTP statuses in one place
(``modelreg.server.app``). Imported only by ``modelreg serve`` and the tests: ``modelreg
--help`` never loads FastAPI.
"""
