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
import operator
import types
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
def _copier(
    cls: type,
) -> tuple[Callable[[Any], tuple[Any, ...]], tuple[Callable[[Any, Any], None], ...], frozenset[str]] | None:
    """For a class :func:`_fields` accepts: every field's value read at once (``attrgetter``)
    and each field's slot setter, in field order (~1.6x faster than ``getattr`` and
    ``object.__setattr__`` by name for each field), and the field names; None when some field
    is not a slot of the class or its bases."""
    names = _fields(cls)
    if names is None:
        return None
    setters = []
    for name in names:
        slot = next((k.__dict__[name] for k in cls.__mro__ if name in k.__dict__), None)
        if not isinstance(slot, types.MemberDescriptorType):
            return None
        setters.append(slot.__set__)
    if len(names) == 1:  # (attrgetter of one name gives the value, not a tuple)
        only = names[0]
        return (lambda obj: (getattr(obj, only),)), tuple(setters), frozenset(names)
    get: Callable[[Any], tuple[Any, ...]] = operator.attrgetter(*names) if names else (lambda obj: ())
    return get, tuple(setters), frozenset(names)


def replaced(obj: T, **changes: Any) -> T:
    """``dataclasses.replace(obj, **changes)``."""
    cls: type = type(obj)
    copier = _copier(cls)
    if copier is None or not changes.keys() <= copier[2]:
        return dataclasses.replace(obj, **changes)  # type: ignore[type-var]
    get, setters, _ = copier
    new: T = object.__new__(cls)
    for set_field, value in zip(setters, get(obj), strict=True):
        set_field(new, value)
    store = object.__setattr__
    for name, value in changes.items():
        store(new, name, value)
    return new
