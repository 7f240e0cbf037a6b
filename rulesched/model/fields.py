"""Typed reads from parsed JSON/YAML objects that fail with one line naming the object and field.

Kubernetes objects reach the decoders as plain ``dict``/``list`` trees from :mod:`json` or
:mod:`yaml`. Hand-written files get types wrong in ways a Go client would reject (a list where a
mapping belongs, ``version: 2`` unquoted where a string belongs), and a ``KeyError`` or
``TypeError`` from deep inside the scheduler would not say where. Every read here checks the type
and raises :class:`~rulesched.errors.ObjectError` with the field path instead.

The getters take the *path of the parent* and the key, and join the two only when raising, so the
happy path builds few strings (one path per list item): decoding tens of thousands of pods must
stay fast.
"""

from __future__ import annotations

import marshal
from collections.abc import Callable, Mapping
from datetime import UTC, date, datetime
from types import MappingProxyType
from typing import Any, TypeVar

from rulesched.errors import ObjectError
from rulesched.model.names import dns1123_label, dns1123_subdomain, label_value, qualified_name, shown
from rulesched.model.objects import EMPTY
from rulesched.model.quantity import MILLI, QuantityError, parse_quantity

NO_FIELDS: Mapping[str, Any] = MappingProxyType({})

# Parts already decoded during one load, keyed by kind and the serialized raw form: the pods of
# one workload carry identical tolerations, affinity and container resources, and building frozen
# values is the dearest step of decoding. The key is marshal format 2, which is fast, keeps 1, 1.0
# and True apart and (unlike later formats) does not depend on reference counts, so equal keys
# always decode alike. One per load; never shared between threads.
Memo = dict[tuple[str, bytes], Any]

T = TypeVar("T")

_INT64 = (-(2**63), 2**63 - 1)
_ANNOTATIONS_LIMIT = 256 * 1024  # bytes of keys and values, as ValidateAnnotations allows

# Suffixes of the quantities that real objects use almost exclusively, parsed without the regex
# and Decimal arithmetic of parse_quantity; anything else goes the exact, slower way.
_FAST_SUFFIX = {
    "m": 1,
    "k": 1000 * MILLI,
    "M": 10**6 * MILLI,
    "G": 10**9 * MILLI,
    "T": 10**12 * MILLI,
    "Ki": 2**10 * MILLI,
    "Mi": 2**20 * MILLI,
    "Gi": 2**30 * MILLI,
    "Ti": 2**40 * MILLI,
}


class Where:
    """The file and object being decoded, so a problem found deep inside names both; it also
    carries the load's :data:`Memo`, if any, to every part decoder."""

    __slots__ = ("source", "obj", "memo", "names")

    def __init__(self, source: str, obj: str, memo: Memo | None = None, names: bool = True) -> None:
        self.source = source
        self.obj = obj
        self.memo = memo
        self.names = names  # check names' formats (see check)

    def error(self, problem: str, field: str = "") -> ObjectError:
        return ObjectError(problem, source=self.source, obj=self.obj, field=field)


def memoized(where: Where, kind: str, raw: Any, build: Callable[[], T]) -> T:
    """``build()``, or the value an equal ``raw`` built earlier in this load. Only successes
    are remembered, so error messages always name the object at hand."""
    memo = where.memo
    if memo is None or raw is None:
        return build()
    try:
        key = (kind, marshal.dumps(raw, 2))
    except ValueError:  # a value JSON cannot hold, e.g. a YAML timestamp: decode it afresh
        return build()
    found = memo.get(key, memo)
    if found is memo:
        found = memo[key] = build()
    return found  # type: ignore[no-any-return]


def check(where: Where, fmt: Callable[[str], str], value: str, at: str, key: object = None) -> None:
    """Raise when ``value`` is not in the format ``fmt`` checks (:mod:`rulesched.model.names`),
    naming the field ``at`` (or its entry ``key``). Not at all when ``where.names`` is off:
    objects that never went through an API server, such as upstream's test tables (``Vol_1``,
    namespace ``subteam1.team1``)."""
    if where.names:
        problem = fmt(value)
        if problem:
            raise where.error(problem, at if key is None else join_key(at, key))


def join(at: str, key: str) -> str:
    """``spec`` + ``nodeName`` -> ``spec.nodeName``; the root path is ``""``."""
    return f"{at}.{key}" if at else key


def join_key(at: str, key: object) -> str:
    """The path of a map's entry: ``metadata.labels.app``, or with a key that would blur the
    path or break the line, ``metadata.labels['a b\\n']``."""
    if type(key) is str and key.isprintable() and key and not any(c in key for c in " []'\""):
        return f"{at}.{key}" if at else key
    return f"{at}[{shown(key) if type(key) is str else repr(key)}]"


def describe(value: object) -> str:
    """A short phrase naming a wrong value and its type, for ``expected X, got Y``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return f"the number {value!r}"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"the string {shown!r}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, date):
        return f"the timestamp {value.isoformat()}"
    return f"a {type(value).__name__}"


def not_a_string(value: object) -> str:
    """The problem with a non-string where a string belongs, hinting at YAML's implicit typing
    (``version: 2``, ``enabled: yes`` and ``released: 2024-05-01`` are not strings unless quoted)."""
    if isinstance(value, bool | int | float | date):
        if isinstance(value, bool):
            shown = "true" if value else "false"
        else:
            shown = value.isoformat() if isinstance(value, date) else repr(value)
        return f'expected a string, got {describe(value)} (quote it in YAML: "{shown}")'
    return f"expected a string, got {describe(value)}"


def get_map(d: Mapping[str, Any], key: str, where: Where, at: str) -> Mapping[str, Any]:
    """``d[key]`` as a mapping; absent or null reads as empty, as in the API."""
    value = d.get(key)
    if value is None:
        return NO_FIELDS
    if type(value) is dict:
        return value
    raise where.error(f"expected a mapping, got {describe(value)}", join(at, key))


def get_list(d: Mapping[str, Any], key: str, where: Where, at: str) -> list[Any]:
    """``d[key]`` as a list; absent or null reads as empty."""
    value = d.get(key)
    if value is None:
        return []
    if type(value) is list:
        return value
    raise where.error(f"expected a list, got {describe(value)}", join(at, key))


def get_maps(d: Mapping[str, Any], key: str, where: Where, at: str) -> list[tuple[str, Mapping[str, Any]]]:
    """The items of a list of mappings, each with its own path (``spec.containers[0]``)."""
    items = d.get(key)
    if items is None:
        return []
    if type(items) is not list:
        raise where.error(f"expected a list, got {describe(items)}", join(at, key))
    base = join(at, key)
    out: list[tuple[str, Mapping[str, Any]]] = []
    for i, item in enumerate(items):
        if type(item) is not dict:
            raise where.error(f"expected a mapping, got {describe(item)}", f"{base}[{i}]")
        out.append((f"{base}[{i}]", item))
    return out


def get_str(d: Mapping[str, Any], key: str, where: Where, at: str, default: str = "") -> str:
    value = d.get(key)
    if value is None:
        return default
    if type(value) is str:
        return value
    raise where.error(not_a_string(value), join(at, key))


def get_int(d: Mapping[str, Any], key: str, where: Where, at: str, default: int = 0) -> int:
    value = get_opt_int(d, key, where, at)
    return default if value is None else value


def get_opt_int(d: Mapping[str, Any], key: str, where: Where, at: str) -> int | None:
    """An integer field; the API's integers are at most 64 bits (many 32: see the decoders)."""
    value = d.get(key)
    if value is None:
        return value
    if type(value) is int:
        if _INT64[0] <= value <= _INT64[1]:
            return value
        raise where.error(f"{describe(value)} does not fit in 64 bits", join(at, key))
    raise where.error(f"expected an integer, got {describe(value)}", join(at, key))


def get_bool(d: Mapping[str, Any], key: str, where: Where, at: str, default: bool = False) -> bool:
    value = d.get(key)
    if value is None:
        return default
    if type(value) is bool:
        return value
    raise where.error(f"expected true or false, got {describe(value)}", join(at, key))


def get_choice(d: Mapping[str, Any], key: str, where: Where, at: str, allowed: tuple[str, ...], default: str) -> str:
    """A string field with a fixed set of values (an operator, an effect, a policy)."""
    value = get_str(d, key, where, at, default)
    if value in allowed:
        return value
    listed = ", ".join(a for a in allowed if a)
    problem = f"missing (one of {listed})" if not value else f"{shown(value)} is not one of {listed}"
    raise where.error(problem, join(at, key))


def get_str_map(d: Mapping[str, Any], key: str, where: Where, at: str) -> Mapping[str, str]:
    """A ``map[string]string`` (labels, annotations, nodeSelector), copied and read-only."""
    value = get_map(d, key, where, at)
    if not value:
        return EMPTY
    for k, v in value.items():
        if type(v) is not str or type(k) is not str:
            path = join_key(join(at, key), k)
            if type(k) is not str:
                raise where.error(f"keys must be strings, got {describe(k)}", path)
            raise where.error(not_a_string(v), path)
    return MappingProxyType(dict(value))


def check_labels(meta: Mapping[str, Any], where: Where) -> None:
    """metadata.labels and annotations in the formats the API server accepts (ValidateLabels,
    ValidateAnnotations: qualified keys, label values, annotations within 256 KiB)."""
    labels = get_str_map(meta, "labels", where, "metadata")
    for k, v in labels.items():
        check(where, qualified_name, k, "metadata.labels", k)
        check(where, label_value, v, "metadata.labels", k)
    annotations = get_str_map(meta, "annotations", where, "metadata")
    size = 0
    for k, v in annotations.items():
        check(where, _annotation_key, k, "metadata.annotations", k)
        size += len(k) + len(v)
    if size > _ANNOTATIONS_LIMIT:
        raise where.error(f"{size} characters in all: more than 256 KiB", "metadata.annotations")


def _annotation_key(key: str) -> str:
    return qualified_name(key.lower())  # upstream checks annotation keys lower-cased


def get_str_list(d: Mapping[str, Any], key: str, where: Where, at: str) -> tuple[str, ...]:
    items = get_list(d, key, where, at)
    for i, item in enumerate(items):
        if type(item) is not str:
            path = f"{join(at, key)}[{i}]"
            raise where.error(not_a_string(item), path)
    return tuple(items)


def quantity(value: object, where: Where, field: str) -> int:
    """A resource quantity in milli-units; the common shapes skip the regex and Decimal."""
    if type(value) is str and value.isascii() and len(value) <= 18:
        if value.isdigit():
            return int(value) * MILLI
        for cut in (1, 2):
            scale = _FAST_SUFFIX.get(value[-cut:])
            if scale is not None and value[:-cut].isdigit():
                return int(value[:-cut]) * scale
    if not isinstance(value, str | int | float):
        raise where.error(f"expected a quantity (e.g. 500m, 2Gi, 1.5), got {describe(value)}", field)
    try:
        milli = parse_quantity(value)
    except QuantityError as err:
        raise where.error(str(err), field) from None
    if milli < 0:
        raise where.error(f"{shown(str(value))} is negative (resource amounts must be 0 or more)", field)
    return milli


def get_resources(d: Mapping[str, Any], key: str, where: Where, at: str, named: bool = False) -> dict[str, int]:
    """A ResourceList (``{cpu: 500m, memory: 1Gi}``) as a fresh dict of milli-units. With
    ``named`` the resource names must be qualified names, as the API server checks a container's
    (it checks no names in a node's capacity: the kubelet writes those)."""
    value = get_map(d, key, where, at)
    out: dict[str, int] = {}
    if value:
        path = join(at, key)
        for name, amount in value.items():
            if type(name) is not str:
                raise where.error(f"keys must be strings, got {describe(name)}", path)
            if named:
                check(where, qualified_name, name, path, name)
            out[name] = quantity(amount, where, f"{path}.{name}")
    return out


def get_time(d: Mapping[str, Any], key: str, where: Where, at: str) -> float:
    """An RFC 3339 time as seconds since the epoch; 0.0 when absent. A time without an offset is
    taken as UTC, which is what the API server writes."""
    value = d.get(key)
    if value is None:
        return 0.0
    if type(value) is str:
        text: str = value
        try:
            value = datetime.fromisoformat(text)
        except ValueError:
            raise where.error(
                f"{shown(text)} is not an RFC 3339 time (expected e.g. 2024-05-01T12:00:00Z)",
                join(at, key),
            ) from None
    elif type(value) is date:  # YAML reads an unquoted 2024-05-01 as a date
        value = datetime(value.year, value.month, value.day)
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value.timestamp()
    raise where.error(f"expected an RFC 3339 time, got {describe(value)}", join(at, key))


def object_metadata(
    obj: object,
    kind: str,
    source: str,
    namespaced: bool,
    memo: Memo | None = None,
    name_format: Callable[[str], str] = dns1123_subdomain,
    names: bool = True,
) -> tuple[Mapping[str, Any], Mapping[str, Any], str, str, Where]:
    """Check the object is a mapping with a name; return it, its metadata, name, namespace and
    a :class:`Where` naming it (``Pod default/web-1``) for every later error. The name, the
    namespace, labels and annotations are checked as the API server's ValidateObjectMeta
    checks them: ``name_format`` is the kind's (most kinds' names are DNS-1123 subdomains);
    ``names`` off skips these checks (see :func:`check`)."""
    if type(obj) is not dict:
        raise ObjectError(f"expected a mapping, got {describe(obj)}", source=source, obj=kind)
    where = Where(source, kind, memo, names)
    meta = get_map(obj, "metadata", where, "")
    name = get_str(meta, "name", where, "metadata")
    if not name:
        raise where.error("missing", "metadata.name")
    problem = name_format(name) if names else ""
    if problem:
        raise where.error(problem, "metadata.name")
    namespace = ""
    if namespaced:
        namespace = get_str(meta, "namespace", where, "metadata") or "default"
        check(where, dns1123_label, namespace, "metadata.namespace")
    where.obj = f"{kind} {namespace}/{name}" if namespaced else f"{kind} {name}"
    check_labels(meta, where)
    return obj, meta, name, namespace, where
