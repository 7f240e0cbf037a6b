"""``dataclasses.replace`` for the model's plain values, at about half its cost.

A scheduling cycle replaces a few frozen dataclasses per pod (the pod with its claims' specs, the
pod bound to its node, the claims allocated): ``dataclasses.replace`` walks every field, then
calls ``__init__`` with all of them as keywords, ~3% of the openb replay (issue 38). For a
frozen dataclass with slots, every field set by ``__init__`` and no ``__post_init__``,
``__init__`` only stores each value, so storing them straight gives the same object.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, TypeVar

T = TypeVar("T")


@functools.cache
def _fields(cls: type) -> tuple[str, ...] | None:
    """The field names ``__init__`` stores, when that is all it does; None otherwise."""
    if not dataclasses.is_dataclass(cls) or "__slots__" not in cls.__dict__ or hasattr(cls, "__post_init__"):
        return None
    fields = dataclasses.fields(cls)
    if any(not f.init for f in fields) or cls.__dataclass_params__.frozen is False:  # type: ignore[attr-defined]
        return None
    return tuple(f.name for f in fields)


def replaced(obj: T, **changes: Any) -> T:
    """``dataclasses.replace(obj, **changes)``."""
    cls: type = type(obj)
    names = _fields(cls)
    if names is None or not changes.keys() <= set(names):
        return dataclasses.replace(obj, **changes)  # type: ignore[type-var]
    new: T = object.__new__(cls)
    store = object.__setattr__
    for name in names:
        store(new, name, changes[name] if name in changes else getattr(obj, name))
    return new
