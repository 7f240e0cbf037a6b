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
from collections.abc import Callable
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


@functools.cache
def _copier(cls: type) -> tuple[Callable[[Any, dict[str, Any]], Any], frozenset[str]] | None:
    """For a class :func:`_fields` accepts, a function storing each field of a copy (one line
    per field, as dataclasses writes ``__init__``: ~2.5x faster than a loop over the names
    with ``getattr``), the changes stored over them; and the field names."""
    names = _fields(cls)
    if names is None:
        return None
    lines = ["def copy(obj, changes):", "    new = make(cls)"]
    lines += [f"    store(new, {name!r}, obj.{name})" for name in names]
    lines += ["    for name, value in changes.items():", "        store(new, name, value)", "    return new"]
    space: dict[str, Any] = {"make": object.__new__, "cls": cls, "store": object.__setattr__}
    exec("\n".join(lines), space)  # (the names are a dataclass's fields: identifiers)
    return space["copy"], frozenset(names)


def replaced(obj: T, **changes: Any) -> T:
    """``dataclasses.replace(obj, **changes)``."""
    cls: type = type(obj)
    copier = _copier(cls)
    if copier is None or not changes.keys() <= copier[1]:
        return dataclasses.replace(obj, **changes)  # type: ignore[type-var]
    new: T = copier[0](obj, changes)
    return new
