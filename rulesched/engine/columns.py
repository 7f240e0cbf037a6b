"""Node values as columns: one numpy array per value the rules read, over a fixed node sequence.

``node.allocatable.cpu`` for every node is one int64 array, built the first time a rule reads it
and kept: columns are node-only facts, so one store serves every pod. Its owner (the scheduler's
:class:`rulesched.engine.table.ColumnStore`, or a benchmark) says which rows changed
(:meth:`NodeColumns.update`). :class:`Groups` partition the nodes by the values of a few fields
(their taints, say), for rules that read nothing else of a node.
Next stage: :mod:`rulesched.engine.vectorise` evaluates rules over these columns.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from rulesched.engine.arrays import Array, dtype_of, typed
from rulesched.engine.settings import EngineSettings
from rulesched.lang import schema
from rulesched.lang.frontend import ast
from rulesched.lang.frontend.checked import Annotations
from rulesched.lang.frontend.through_lets import DONE, INTO, STOP, Visit, is_rule_variable, through_lets
from rulesched.lang.types import STRING, Type

Rows = npt.NDArray[np.intp]  # indexes into NodeColumns.nodes


@dataclass(frozen=True)
class Path:
    """A read of node values as steps: ``("field", getter)``, ``("key", key, default)`` (a map
    read, ``default`` when absent), ``("len",)``. No steps: the node itself. A whole column is
    read one step at a time over every node (one map or comprehension per step), and the path is
    the column's cache key."""

    steps: tuple[tuple[Any, ...], ...] = ()

    def __post_init__(self) -> None:
        # (the column's cache key, hashed at every read: the steps' hash made once)
        object.__setattr__(self, "_hash", hash(self.steps))

    def __hash__(self) -> int:
        return self._hash  # type: ignore[attr-defined,no-any-return]

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path, (self.steps,))  # (made anew: a string's hash is the process's own)

    def then(self, *step: Any) -> Path:
        return Path((*self.steps, step))

    def read_all(self, nodes: Sequence[Any], prefix: list[Any] | None = None, skip: int = 0) -> list[Any]:
        """The path's value for each node; ``prefix``: the values of its first ``skip`` steps."""
        values = list(nodes) if prefix is None else prefix
        for step in self.steps[skip:]:
            if step[0] == "field":
                values = list(map(step[1], values))
            elif step[0] == "key":
                key, default = step[1], step[2]
                values = [v.get(key, default) for v in values]
            else:
                values = list(map(len, values))
        return values


class NodeColumns:
    """Node values as arrays over a fixed sequence of nodes, each built on first use.

    Columns are node-only facts (a node's allocatable cpu, its pod count), so one store serves
    every pod; :meth:`update` notes the rows of nodes that changed, which each column re-reads
    when it is next read, :meth:`clear` drops all. The least recently read columns go beyond
    ``settings.max_columns`` (or ``max_cells``; :class:`rulesched.engine.settings.EngineSettings`)."""

    def __init__(self, nodes: Sequence[Any], settings: EngineSettings | None = None) -> None:
        self.nodes = nodes
        settings = settings if settings is not None else EngineSettings()
        self._few_rows, self._max_groups = settings.few_rows, settings.max_groups
        self._columns: dict[Path, Array] = {}  # in order of last use
        # Rows changed (repeats possible) since the list was last emptied, and per column how
        # many of them it has re-read.
        self._changed: list[int] = []
        self._synced: dict[Path, int] = {}
        self._limit = max(settings.min_columns, min(settings.max_columns, settings.max_cells // max(1, len(nodes))))
        self._objects: Array | None = None
        self._groups: dict[tuple[str, tuple[str, ...]], Groups | None] = {}
        # A path's first step over every node (node.allocatable, say), kept while the columns
        # are built: node.allocatable.cpu, .memory and .pods read it once.
        self._prefixes: dict[tuple[Any, ...], list[Any]] = {}
        self._bounds: dict[Path, int | float] = {}

    def objects(self) -> Array:
        """The nodes themselves, as an object array."""
        if self._objects is None:
            self._objects = np.fromiter(self.nodes, dtype=object, count=len(self.nodes))
        return self._objects

    def column(self, path: Path, kind: Type) -> Array:
        """The path's value for every node (``kind``: the rules' type of it)."""
        columns = self._columns
        hit = columns.pop(path, None)
        if hit is not None and self._synced[path] != len(self._changed):
            hit = self._catch_up(path, hit)
        if hit is None:
            if len(path.steps) > 1 and path.steps[0][0] == "field":
                first = path.steps[0]
                prefix = self._prefixes.get(first)
                if prefix is None:
                    prefix = self._prefixes[first] = list(map(first[1], self.nodes))
                values = path.read_all(self.nodes, prefix, 1)
            else:
                values = path.read_all(self.nodes)
            hit = typed(values, kind)
            self._synced[path] = len(self._changed)
            while len(columns) >= self._limit:  # the least recently read goes
                old = next(iter(columns))
                del columns[old], self._synced[old]
                self._bounds.pop(old, None)
        columns[path] = hit  # (last: the most recently read)
        return hit

    def _catch_up(self, path: Path, array: Array) -> Array | None:
        """Re-read the rows changed since the column last did; None when a value no longer fits
        its dtype (or too much changed: building it again is as cheap)."""
        pending = self._changed[self._synced[path] :]
        index = list(set(pending)) if len(pending) > 1 else pending
        self._synced[path] = len(self._changed)
        if len(index) * 4 > len(self.nodes):
            self._bounds.pop(path, None)
            return None
        nodes = self.nodes
        values = path.read_all([nodes[i] for i in index])
        kind = array.dtype.kind
        if kind != "O" and dtype_of(values, None) != array.dtype:
            self._bounds.pop(path, None)  # a value the column's dtype cannot hold exactly
            return None
        if len(index) <= self._few_rows:  # (a bind's one node: numpy's per-call cost would be most of it)
            for i, v in zip(index, values, strict=True):
                array[i] = v
        elif kind == "O":
            array[index] = np.fromiter(values, dtype=object, count=len(values))
        else:
            array[index] = values
        bound = self._bounds.get(path)
        if bound is not None and kind in ("i", "f"):  # (it only grows: still a bound for every row)
            self._bounds[path] = max(bound, max(abs(float(v)) if kind == "f" else abs(int(v)) for v in values))
        return array

    def bound(self, path: Path, kind: Type) -> int | float | None:
        """The largest magnitude in the path's numeric column (an upper bound for any of its
        rows, which is all exact arithmetic needs), or None for a column that is not numbers."""
        a = self.column(path, kind)  # (first: it brings the column, and its bound, up to date)
        hit = self._bounds.get(path)
        if hit is None:
            if a.dtype == object or a.dtype == bool:
                return None
            if not len(a):
                hit = 0
            elif a.dtype.kind == "f":
                hit = float(np.max(np.abs(a)))
            else:
                hit = int(max(int(a.max()), -int(a.min())))
            self._bounds[path] = hit
        return hit

    def derived(self, get: Callable[[Any], Any], kind: Type) -> Array:
        """A node-only value computed by ``get`` for every node, kept like the other columns;
        ``get`` is the cache key (a module-level function, or a value-equal callable)."""
        return self.column(Path((("field", get),)), kind)

    def label_in(self, key: str, values: Collection[str], rows: Rows) -> npt.NDArray[np.bool_]:
        """Whether each row's node has label ``key`` with one of ``values`` (for built-ins'
        columns hooks, which import no numpy)."""
        column = self.column(Path((("field", _LABELS), ("key", key, None))), STRING)[rows]
        return np.fromiter((v in values for v in column.tolist()), dtype=bool, count=len(rows))

    def label_values(self, key: str, rows: Rows) -> list[Any]:
        """Each row's node's value of label ``key`` (None where absent), as a list (for
        built-ins' columns hooks, which import no numpy)."""
        column: list[Any] = self.column(Path((("field", _LABELS), ("key", key, None))), STRING)[rows].tolist()
        return column

    def groups(self, fields: tuple[str, ...]) -> Groups | None:
        """Nodes grouped by their values of these node fields: each row's group, and one row per
        group (its representative). None when the values are unhashable or nearly all distinct."""
        return self._grouped(("fields", fields), _getters(fields))

    def label_groups(self, keys: tuple[str, ...]) -> Groups | None:
        """Nodes grouped by their values of these labels (None when absent), as :meth:`groups`."""
        return self._grouped(("labels", keys), [_label(k) for k in keys])

    def _grouped(self, key: tuple[str, tuple[str, ...]], getters: list[Callable[[Any], Any]]) -> Groups | None:
        if key not in self._groups:
            self._groups[key] = Groups.of(self.nodes, getters, self._max_groups)
        return self._groups[key]

    def update(self, rows: Sequence[int], nodes: Sequence[Any] | None = None, pods_only: bool = False) -> None:
        """Re-read the given rows of every column: their nodes changed (and are, with ``nodes``,
        new node objects at the same positions: a newer snapshot's). ``pods_only``: only pods
        came or went there, so groups by labels stay as they are (a pod changes no label)."""
        if nodes is not None:
            self.nodes = nodes
            self._prefixes.clear()
        if not rows:
            return
        self._prefixes.clear()
        index = list(rows)
        nodes = self.nodes
        if self._objects is not None:
            for i in index:
                self._objects[i] = nodes[i]
        for key, groups in list(self._groups.items()):
            # (None stays None: too many distinct values, or unhashable ones, rarely stop being so
            # when pods come and go, and finding out again costs a pass over every node.)
            if pods_only and key[0] == "labels":
                continue
            if groups is not None and not groups.still(nodes, rows):
                del self._groups[key]
        # Columns re-read these rows when next read (most are, by the next cycle; a column read
        # once, for one pod's own resource, never is). Past a node count's worth of changes the
        # list starts again: columns behind it are rebuilt when read.
        changed = self._changed
        if len(changed) + len(index) > max(4096, len(nodes)):
            for path in [p for p, at in self._synced.items() if at != len(changed)]:
                del self._columns[path], self._synced[path]
                self._bounds.pop(path, None)
            changed.clear()
            self._synced = dict.fromkeys(self._synced, 0)
        changed.extend(index)

    def clear(self) -> None:
        self._columns.clear()
        self._synced.clear()
        self._changed.clear()
        self._groups.clear()
        self._prefixes.clear()
        self._bounds.clear()
        self._objects = None


class Groups:
    """Rows grouped by the values some getters read (node fields, labels): ``codes[row]`` is the
    row's group, ``representatives[g]`` a row of group g. What depends on a node only through
    those values has one answer per group, so it is evaluated on the representatives alone."""

    __slots__ = ("codes", "representatives", "_index", "_getters", "_keys")

    def __init__(
        self,
        getters: list[Callable[[Any], Any]],
        codes: npt.NDArray[np.intp],
        representatives: list[int],
        index: dict[Any, int],
    ) -> None:
        self.codes, self.representatives, self._index, self._getters = codes, representatives, index, getters
        self._keys: list[tuple[Any, ...]] | None = None

    def keys(self) -> list[tuple[Any, ...]]:
        """Each group's values of the getters (one tuple per group, in group order): a label
        group's label values without reading the representatives' nodes."""
        if self._keys is None:
            keys: list[tuple[Any, ...]] = [()] * len(self.representatives)
            for key, code in self._index.items():
                keys[code] = key
            self._keys = keys
        return self._keys

    @staticmethod
    def of(
        nodes: Sequence[Any], getters: list[Callable[[Any], Any]], max_groups: int = EngineSettings.max_groups
    ) -> Groups | None:
        """Codes of the nodes by their values of ``getters``; None when there are more than
        ``max_groups`` (or an eighth of the nodes, if more) distinct ones."""
        fast = Groups._of_plain(nodes, getters, max_groups)
        if fast is not False:
            return fast
        index: dict[Any, int] = {}
        representatives: list[int] = []
        codes = np.empty(len(nodes), dtype=np.intp)
        limit = max(max_groups, len(nodes) // 8)
        try:
            if len(getters) == 1:
                get = getters[0]
                keys: Iterable[Any] = ((_frozen(get(node)),) for node in nodes)
            else:
                keys = (tuple(_frozen(get(node)) for get in getters) for node in nodes)
            for row, key in enumerate(keys):  # lazily: too many distinct values stops early
                code = index.get(key)
                if code is None:
                    if len(representatives) >= limit:
                        return None
                    code = index[key] = len(representatives)
                    representatives.append(row)
                codes[row] = code
        except TypeError:  # unhashable values (pods, records holding dicts)
            return None
        return Groups(getters, codes, representatives, index)

    @staticmethod
    def _of_plain(
        nodes: Sequence[Any], getters: list[Callable[[Any], Any]], max_groups: int
    ) -> Groups | None | Literal[False]:
        """:meth:`of` for getters whose values are strings, None or tuples (labels, taints): keys
        as they are, codes in one pass. False: other values, use the general way."""
        if not getters:
            return False
        columns = [list(map(get, nodes)) for get in getters]
        if not all(type(v) in _PLAIN for values in columns for v in values):
            return False
        index: dict[Any, int] = {}
        keys: list[Any] = columns[0] if len(columns) == 1 else list(zip(*columns, strict=True))
        try:
            codes = [index.setdefault(k, len(index)) for k in keys]
        except TypeError:  # a tuple holding something unhashable
            return False
        if len(index) > max(max_groups, len(nodes) // 8):
            return None
        array = np.array(codes, dtype=np.intp)
        representatives = np.unique(array, return_index=True)[1].tolist() if len(array) else []
        if len(columns) == 1:  # keys as still() makes them: a tuple of one value per getter
            index = {(k,): code for k, code in index.items()}
        return Groups(getters, array, representatives, index)

    def still(self, nodes: Sequence[Any], rows: Sequence[int]) -> bool:
        """Whether the changed rows kept their group (a pod bound to a node leaves its taints)."""
        getters, index, codes = self._getters, self._index, self.codes
        try:
            return all(index.get(tuple(_frozen(get(nodes[r])) for get in getters)) == codes[r] for r in rows)
        except TypeError:
            return False


_LABELS = schema.RECORDS[schema.NODE]["labels"].get  # (the getter rules' node.labels paths use)
_PLAIN = frozenset({str, type(None), tuple})  # values _frozen leaves as they are


def _getters(fields: tuple[str, ...]) -> list[Callable[[Any], Any]]:
    node_fields = schema.RECORDS[schema.NODE]
    return [node_fields[f].get for f in fields]


def _label(key: str) -> Callable[[Any], Any]:
    return lambda node: node.labels.get(key)


def _frozen(value: Any) -> Any:
    if type(value) is tuple:  # the common case (taints): hashed when used as a key
        return value
    if isinstance(value, Mapping):
        return frozenset(value.items())
    if isinstance(value, list):
        return tuple(value)
    hash(value)
    return value


def node_fields(expr: ast.Expr, notes: Annotations, lets: dict[str, ast.Let]) -> tuple[str, ...] | None:
    """The node fields ``expr`` reads, when it reads the node only as ``node.FIELD`` (sorted);
    None when it passes the node as a whole (to a built-in) or reads none."""
    found: set[str] = set()

    def visit(e: ast.Expr, parent: ast.Expr | None) -> Visit:
        if not isinstance(e, ast.Name):
            return INTO
        ref = notes.names[id(e)]
        if ref.kind == "bound" or ref.name != schema.NODE_VARIABLE:
            return DONE
        attr = notes.attrs.get(id(parent)) if isinstance(parent, ast.Attr) else None
        if attr is None or attr.field is None:
            return STOP
        assert isinstance(parent, ast.Attr)
        found.add(parent.name)
        return DONE

    if not through_lets(expr, notes, lets, visit) or not found:
        return None
    return tuple(sorted(found))


def node_labels(expr: ast.Expr, notes: Annotations, lets: dict[str, ast.Let]) -> tuple[str, ...] | None:
    """The label keys ``expr`` reads the node through, when it reads the node only as
    ``node.labels[KEY]``, ``KEY in node.labels``, ``has(node.labels, KEY)`` or ``domain(node, KEY)`` with KEY a string
    written out (directly or as a let): then nodes alike in those labels have one answer for a
    pod in one cluster state, whatever else the rule reads (sorted; None otherwise, or when it
    reads the node not at all). Rules over topology domains are so: once per zone or rack."""
    found: set[str] = set()

    def constant(e: ast.Expr) -> str | None:
        if isinstance(e, ast.Literal):
            return e.value if isinstance(e.value, str) else None
        if isinstance(e, ast.Name):
            ref = notes.names.get(id(e))
            if ref is not None and ref.kind == "let":
                return constant(lets[ref.name].value)
        return None

    def is_node(e: ast.Expr) -> bool:
        return is_rule_variable(notes, e, schema.NODE_VARIABLE)

    def node_labels_attr(e: ast.Expr) -> bool:
        return isinstance(e, ast.Attr) and e.name == "labels" and is_node(e.obj)

    def label_key(e: ast.Expr) -> ast.Expr | None:
        """The key expression of ``node.labels[KEY]``, ``KEY in node.labels``,
        ``has(node.labels, KEY)`` or ``domain(node, KEY)``; None for any other expression."""
        if isinstance(e, ast.Index) and node_labels_attr(e.obj):
            return e.key
        if isinstance(e, ast.Binary) and e.op in ("in", "not in") and node_labels_attr(e.right):
            return e.left
        if isinstance(e, ast.Call) and len(e.args) == 2:
            if (e.func == "has" and node_labels_attr(e.args[0])) or (e.func == "domain" and is_node(e.args[0])):
                return e.args[1]
        return None

    def visit(e: ast.Expr, parent: ast.Expr | None) -> Visit:
        key_expr = label_key(e)
        if key_expr is not None:
            key = constant(key_expr)
            if key is None:
                return STOP
            found.add(key)
            return DONE
        if isinstance(e, ast.Name):
            ref = notes.names[id(e)]
            return DONE if ref.kind == "bound" or ref.name != schema.NODE_VARIABLE else STOP
        return INTO

    if not through_lets(expr, notes, lets, visit) or not found:
        return None
    return tuple(sorted(found))
