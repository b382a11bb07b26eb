"""How ``Registry`` offers its parts' methods: each public method is a ``Delegate`` naming the
part that holds it and the method — the registry holds its parts and delegates to them, and
the method keeps its own signature and docstring for editors, ``mypy``, ``help()`` and the
reference page (``api.reference``)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

P = ParamSpec("P")
R = TypeVar("R")


class Delegate(Generic[P, R]):
    """``name = Delegate("_part", Part.name)``: ``registry.name(...)`` calls
    ``registry._part.name(...)``."""

    def __init__(self, part: str, method: Callable[Concatenate[Any, P], R]) -> None:
        self.part = part
        self.method = method
        # __name__, __doc__, __wrapped__ (``inspect.signature`` follows it), __module__
        functools.update_wrapper(self, method)

    @overload
    def __get__(self, obj: None, owner: type) -> Delegate[P, R]: ...

    @overload
    def __get__(self, obj: object, owner: type) -> Callable[P, R]: ...

    def __get__(self, obj: object | None, owner: type) -> Any:
        if obj is None:
            return self
        bound: Callable[P, R] = getattr(getattr(obj, self.part), self.method.__name__)
        return bound

    def __call__(self, obj: Any, *args: P.args, **kwargs: P.kwargs) -> R:
        """``Registry.name(registry, ...)``: the unbound form, as for any method."""
        bound: Callable[P, R] = getattr(getattr(obj, self.part), self.method.__name__)
        return bound(*args, **kwargs)
