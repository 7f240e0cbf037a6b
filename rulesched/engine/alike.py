"""Score vectors shared between nodes alike in everything the scores read of them.

A class's score rows (:mod:`rulesched.engine.score_rows`) are kept per node and recomputed when
the node changes. Yet many nodes are alike: a cluster is built from a few machine types, and
nodes of one type holding alike pods are alike to every rule that reads neither their name nor
their labels. On the openb replay FGD scores 98,163 stale rows, of only 19,376 distinct contents
(score key, the node's free cpu, its GPUs now and after the pod's allocation). So a score row is
looked up by that content first, and computed only when no node alike had it computed. (What
it saves is less than the rows suggest: the rows found alike are mostly those whose lets the
kept answers, rulesched.lang.evaluation.let_memo, answered cheaply; 2% of the replay's CPU.)

That is sound when the scores read the node only through values the key holds.
:func:`node_reads` decides it once per rule, as :mod:`rulesched.engine.sharing` decides what a rule
reads of the pod: the body (and the lets it reads) may read ``node.F`` (the key holds the field's
value) or one entry of a map field, ``node.F.KEY`` / ``node.F["KEY"]`` (that entry), may call
``devices_after(node)`` (the key holds the node's devices and which of them the pod's allocation
takes, and how: the devices after it follow from those; the allocator's other inputs, a device
score reading the pool say, may take others on a node alike, which then keys apart), reads no
other variable than the pod and the node (no cluster, no victim),
calls no other built-in that takes a node or a device, and reads no device's ``pool`` (the one
field of a device that names its node: every other one is in the key). The pod side is the
score rows' own key (a class's, or classes sharing them), so nothing else moves a score's answer.

A device's content is interned as a number and a node's list of devices as the tuple of those
numbers, once per list (the store makes a node a new one only when what claims hold there
changes; the node's list now is kept by its name); ``devices_after(node)`` is keyed by the devices the allocation takes (their positions
in the node's list) and how, without working out the devices after it.
Next stage: :meth:`rulesched.engine.table.NodeTable.vectors` looks rows up by these keys.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any

from rulesched.engine.sharing import constant_entry, is_field_read
from rulesched.lang import schema
from rulesched.lang.builtins import BUILTINS
from rulesched.lang.builtins.dra import devices_after_key
from rulesched.lang.frontend import ast
from rulesched.lang.frontend.checked import Annotations
from rulesched.lang.frontend.through_lets import DONE, INTO, Visit, is_rule_variable, through_lets
from rulesched.lang.types import ListOf, MapOf, Type

AFTER = "devices_after"
LIMIT = 20_000  # device lists and contents kept (see DeviceKeys)
_ABSENT = object()  # (a map entry's key where the node's map has no such entry)


@dataclass(frozen=True)
class NodeReads:
    """What some rules read of the node, when it is only values a key can hold."""

    paths: tuple[tuple[str, str | None], ...] = ()  # (field, None: whole | a map entry's key), sorted
    devices: bool = False  # node.devices, or devices_after(node): the node's devices
    after: bool = False  # devices_after(node): the devices after the pod's allocation

    def join(self, other: NodeReads) -> NodeReads:
        return NodeReads(
            tuple(sorted({*self.paths, *other.paths}, key=lambda p: (p[0], p[1] or ""))),
            self.devices or other.devices,
            self.after or other.after,
        )


class _NotAlike(Exception):
    pass


def node_reads(expr: ast.Expr, notes: Annotations, lets: dict[str, ast.Let]) -> NodeReads | None:
    """What ``expr`` reads of the node (see the module's docstring); None when its answer may
    depend on more than that and the pod."""
    paths: set[tuple[str, str | None]] = set()
    devices = after = False

    def visit(e: ast.Expr, parent: ast.Expr | None) -> Visit:
        nonlocal devices, after
        if isinstance(e, ast.Attr) and e.name == "pool":
            raise _NotAlike  # (a device's pool names its node)
        entry = _node_entry(notes, e)
        if entry is not None:
            paths.add(entry)
            return DONE
        if isinstance(e, ast.Name):
            ref = notes.names[id(e)]
            if ref.kind == "bound" or ref.name == schema.POD_VARIABLE:
                pass
            elif ref.name == schema.NODE_VARIABLE:
                if not (isinstance(parent, ast.Attr) and is_field_read(notes, parent)):
                    raise _NotAlike  # (the node whole: passed on, compared, ...)
                assert isinstance(parent, ast.Attr)
                if parent.name == "devices":
                    devices = True
                else:
                    paths.add((parent.name, None))
            else:
                raise _NotAlike  # (the cluster, a victim)
            return DONE
        if isinstance(e, ast.Call):
            if e.func == AFTER and len(e.args) == 1 and is_rule_variable(notes, e.args[0], schema.NODE_VARIABLE):
                devices = after = True
                return DONE
            if BUILTINS[e.func].context or any(_holds_node_values(notes.types.get(id(a))) for a in e.args):
                raise _NotAlike
        return INTO

    try:
        through_lets(expr, notes, lets, visit)
    except _NotAlike:
        return None
    return NodeReads(tuple(sorted(paths, key=lambda p: (p[0], p[1] or ""))), devices, after)


def _node_entry(notes: Annotations, e: ast.Expr) -> tuple[str, str] | None:
    """(field, key) where ``e`` reads one entry of a node map field by a constant key:
    ``node.F.KEY`` (a resource map) or ``node.F["KEY"]``; else None."""
    entry = constant_entry(notes, e, schema.NODE)
    if entry is None or not is_rule_variable(notes, entry[0].obj, schema.NODE_VARIABLE):
        return None
    return entry[0].name, entry[1]


def _holds_node_values(t: Type | None) -> bool:
    """Whether a value of type ``t`` may be a node or a device (or hold one): a built-in given it
    may read what the key does not hold. Unknown: it may."""
    if t is None:
        return True
    if isinstance(t, ListOf):
        return _holds_node_values(t.elem)
    if isinstance(t, MapOf):
        return _holds_node_values(t.value)
    return t in (schema.NODE, schema.DEVICE)


class DeviceKeys:
    """Device lists interned by content (every field rules read of a device but its pool): equal
    numbers, equal contents. One per column store: every table's keys use the same numbers."""

    def __init__(self, limit: int = LIMIT) -> None:
        self._limit = limit
        # a device's content -> its number (past ``limit`` contents, numbering starts again)
        self._codes: dict[tuple[Any, ...], int] = {}
        # slot (a node's name) -> its list, the list's numbers and each device id's position. The
        # store makes a node a new tuple of new devices when what claims hold there changes, so
        # a list's devices are numbered once, and only the node's list now is kept.
        self._lists: dict[Hashable, tuple[Any, tuple[int, ...], dict[tuple[str, str, str], int]]] = {}
        # In every key: numbers given after a restart are not those before, so keys made before
        # it never equal keys made after.
        self.epoch = 0

    def of(self, devices: tuple[Any, ...], slot: Hashable = None) -> tuple[int, ...]:
        """The numbers of ``devices``' contents, in order (``slot``: as :meth:`numbered`)."""
        return self.numbered(devices, slot)[1]

    def numbered(
        self, devices: tuple[Any, ...], slot: Hashable = None
    ) -> tuple[Any, tuple[int, ...], dict[tuple[str, str, str], int]]:
        """``devices``, the numbers of their contents in order, and each one's id -> its
        position; kept in ``slot`` (a node's name: its list now) until another list takes it."""
        hit = self._lists.get(slot)
        if hit is not None and hit[0] is devices:
            return hit
        if len(self._lists) >= self._limit:
            self._lists.clear()  # (the lists seen go, their contents' numbers stay: keys still hold)
        if len(self._codes) >= self._limit:
            self._restart()
        numbers = tuple(self._number(d) for d in devices)
        found = self._lists[slot] = (devices, numbers, {d.id: i for i, d in enumerate(devices)})
        return found

    def _number(self, d: Any) -> int:
        content = (
            d.driver,
            d.name,
            frozenset(d.attributes.items()),
            frozenset(d.numbers.items()),
            frozenset(d.capacity.items()),
            frozenset(d.consumed.items()),
            frozenset(d.free.items()),
            d.allocated,
            d.shared,
            d.claims,
            d.taints,
        )
        return self._codes.setdefault(content, len(self._codes))

    def _restart(self) -> None:
        self._codes.clear()
        self._lists.clear()
        self.epoch += 1


def keyer(reads: NodeReads, ctx: Any, devices: DeviceKeys) -> Callable[[Any], Hashable | None]:
    """A node's key for rules reading ``reads`` of it, bound to ``ctx`` (the binding's: the
    pod's claims for ``devices_after``); None for a node whose values are no key. (A key may
    still hold something unhashable: the caller's look-up raises TypeError then.)"""
    fields = schema.RECORDS[schema.NODE]
    getters = [(fields[name].get, key) for name, key in reads.paths]
    get_devices = fields["devices"].get
    with_devices, with_after = reads.devices, reads.after
    numbered = devices.numbered

    def key(node: Any) -> Hashable | None:
        parts: list[Any] = [devices.epoch]
        for get, entry in getters:
            value = get(node)
            if entry is None:
                parts.append(_frozen(value))
            elif isinstance(value, Mapping):
                parts.append(value.get(entry, _ABSENT))
            else:
                return None
        if with_devices:
            now, numbers, positions = numbered(get_devices(node), node.name)
            parts.append(numbers)
            if with_after:
                # (devices_after(node) is node.devices with the devices the allocation takes
                # changed: which, and how, is the rest of its key)
                after = devices_after_key(ctx, node, positions)
                if after is None:
                    return None
                parts.append(after)
        return tuple(parts)

    return key


def _frozen(value: Any) -> Any:
    if isinstance(value, Mapping):
        return frozenset(value.items())
    if isinstance(value, list):
        return tuple(value)
    return value
