"""YAML read within bounds, and fast where the input allows: what cluster files
(:mod:`rulesched.simulate.documents`), rule test files, ``--config`` files and kubeconfigs are
read with. Errors come as one line naming the file, line and column (:func:`yaml_problem`).

:class:`YamlReader` is libyaml's parser with PyYAML's composer and safe constructor (the tags,
the YAML 1.1 implicit types, merge keys: everything ``yaml.safe_load`` reads), counting what
aliases expand to as it composes: a document may not owe more of itself to aliases than go-yaml
(kubectl's YAML decoder) allows -- more than 100 nodes by alias and above 99% of a document up to
400 000 nodes, falling to 10% at 4 000 000 ("excessive aliasing"). An alias to a node that
contains it and an integer of more than 64 characters are refused too, with line and column.

With ``fast`` set, :meth:`YamlReader.next_value` builds values straight from the parser's events
instead, without PyYAML's node graph: about twice as fast on what ``kubectl get -o yaml`` prints
(plain and quoted scalars, block and flow collections). It raises :class:`Unusual` at the first
anchor, alias, explicit tag, merge key or complex key; the caller then reads the file again the
composing way (:func:`rulesched.simulate.documents.read_objects` skips what it already handed out).
"""

from __future__ import annotations

from collections.abc import Hashable
from pathlib import Path
from typing import Any, BinaryIO, cast

import yaml
from yaml.composer import Composer
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.events import (
    AliasEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
)
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.resolver import Resolver

_LONGEST_INT = 64  # characters of a YAML integer; 2^64 has 20 digits, 0b... 64 bits
_ALIAS_LOW, _ALIAS_HIGH = 400_000, 4_000_000  # go-yaml's alias_ratio_range_low and _high
PLAIN_MAP = (None, "!", "tag:yaml.org,2002:map")  # tags of a mapping read as a plain one
_PLAIN_SEQ = (None, "!", "tag:yaml.org,2002:seq")
_STR = "tag:yaml.org,2002:str"
_MERGE = "tag:yaml.org,2002:merge"
_SIMPLE = ("tag:yaml.org,2002:null", "tag:yaml.org,2002:bool", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float")
_KNOWN_SCALARS = 200_000  # plain scalars whose values are remembered, per reader
_NO_KEY = object()  # a mapping waiting for its next key


class Unusual(Exception):
    """The fast builder met something only the composer handles (an anchor, an alias, a tag)."""


try:
    from yaml._yaml import CParser as _Parser
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    from yaml.parser import Parser as _PyParser
    from yaml.reader import Reader
    from yaml.scanner import Scanner

    class _Parser(Reader, Scanner, _PyParser):  # type: ignore[no-redef]
        def __init__(self, stream: Any) -> None:
            Reader.__init__(self, stream)
            Scanner.__init__(self)
            _PyParser.__init__(self)


class YamlReader(_Parser, Composer, SafeConstructor, Resolver):
    """libyaml's parser with PyYAML's composer (``yaml.CSafeLoader`` composes in C by recursion
    and crashes the interpreter, SIGSEGV, on a line of 100 000 ``[``; the Python composer raises
    RecursionError instead), counting alias expansion as it composes."""

    def __init__(self, stream: bytes | str | BinaryIO, fast: bool = False) -> None:
        _Parser.__init__(self, stream)
        Composer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)
        self.fast = fast
        self.documents = 0  # non-empty documents read
        self._plain: dict[str, Any] = {}  # plain scalar -> its value (fast building)
        self._start_document()

    check_node = Composer.check_node
    get_node = Composer.get_node
    get_single_node = Composer.get_single_node

    def _start_document(self) -> None:
        self.anchors = {}
        self._written = 0  # nodes composed since the document's first anchor
        self._by_alias = 0  # nodes aliases stand for, expanded
        self._sizes: dict[int, int] = {}  # id(node) -> its size expanded

    def compose_document(self) -> Node | None:
        self._start_document()
        node: Node | None = super().compose_document()
        self._start_document()
        return node

    def next_value(self) -> Any:
        """The next node's value (the top level's keys, values, items): built from events when
        ``fast``, else composed and constructed."""
        if self.fast:
            return self._build()
        return self.construct_document(cast(Node, self.compose_node(None, 0)))

    def next_key(self) -> tuple[Any, bool]:
        """The next mapping key's value, and whether it is the merge key ``<<`` (whose value,
        a mapping or a list of them, supplies the keys the mapping does not give)."""
        if self.fast:
            return self._build(), False  # (the fast builder refuses a merge key: Unusual)
        node = cast(Node, self.compose_node(None, 0))
        if node.tag == _MERGE:
            return None, True
        return self.construct_document(node), False

    def _build(self) -> Any:
        """The next node's value straight from the events, with a loop rather than recursion
        (libyaml refuses nesting past 1000 levels, and nothing here would overflow anyway)."""
        get: Any = self.get_event  # (events typed loosely: the stubs allow None)
        open_: list[Any] = []  # the collections being filled, innermost last
        keys: list[Any] = []  # per open collection: a mapping's pending key, or _NO_KEY
        while True:
            event = get()
            cls = type(event)
            if cls is ScalarEvent:
                if event.anchor is not None:
                    raise Unusual
                value = self._scalar(event)
            elif cls is MappingStartEvent or cls is SequenceStartEvent:
                mapping = cls is MappingStartEvent
                if event.anchor is not None or event.tag not in (PLAIN_MAP if mapping else _PLAIN_SEQ):
                    raise Unusual
                open_.append({} if mapping else [])
                keys.append(_NO_KEY)
                continue
            elif cls is MappingEndEvent or cls is SequenceEndEvent:
                keys.pop()
                value = open_.pop()
            else:  # an alias
                raise Unusual
            if not open_:
                return value
            into = open_[-1]
            if type(into) is list:
                into.append(value)
            elif keys[-1] is _NO_KEY:
                if not isinstance(value, Hashable):  # a complex key: PyYAML's verdict, with its mark
                    raise Unusual
                keys[-1] = value
            else:
                into[keys[-1]] = value
                keys[-1] = _NO_KEY

    def _scalar(self, event: Any) -> Any:
        """A scalar's value as the safe constructor makes it; plain ones remembered (they repeat:
        ``true``, ``Running``, label values), which shares equal strings too."""
        if event.tag is not None:  # explicit: !!str, !!binary, a custom tag, the "!" of '! x'
            raise Unusual
        value: str = event.value
        if not event.implicit[0]:  # quoted: a string
            return value
        found = self._plain.get(value, _NO_KEY)
        if found is not _NO_KEY:
            return found
        resolve: Any = self.resolve  # (untyped in the stubs)
        tag = resolve(ScalarNode, value, event.implicit)
        if tag == _STR:
            found = value
        elif tag in _SIMPLE:
            node = ScalarNode(tag, value, event.start_mark, event.end_mark)
            found = self.yaml_constructors[tag](self, node)
        else:  # a timestamp, the merge key "<<", the value key "="
            raise Unusual
        if len(self._plain) >= _KNOWN_SCALARS:
            self._plain.clear()
        self._plain[value] = found
        return found

    def peek(self) -> Any:
        """The next event (the stubs allow None, which the composer never meets)."""
        return self.peek_event()

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        if not self.anchors:  # no anchor yet in this document, so no alias: the common case
            return super().compose_node(parent, index)
        if not self.check_event(AliasEvent):
            self._written += 1
            return super().compose_node(parent, index)
        mark = self.peek().start_mark
        node = cast(Node, super().compose_node(parent, index))
        if node.end_mark is None:  # a collection still being composed: it would contain itself
            raise ConstructorError(None, None, "an alias refers to a node that contains it", mark)
        self._by_alias += self._size(node, mark)
        total = self._written + self._by_alias
        if self._by_alias > 100 and total > 1000 and self._by_alias / total > _allowed_alias_ratio(total):
            raise ConstructorError(
                None,
                None,
                f"excessive aliasing: aliases expand to {self._by_alias} nodes, {self._written} written",
                mark,
            )
        return node

    def _size(self, root: Node, mark: Any) -> int:
        """How many nodes ``root`` stands for with every alias inside expanded; a node that
        contains itself is refused (go-yaml: "anchor ... value contains itself")."""
        sizes = self._sizes
        if id(root) in sizes:
            return sizes[id(root)]
        open_: set[int] = set()
        stack: list[tuple[Node, bool]] = [(root, False)]
        while stack:
            node, done = stack.pop()
            key = id(node)
            children = _children(node)
            if done:
                open_.discard(key)
                sizes[key] = 1 + sum(sizes[id(c)] for c in children)
                continue
            if key in sizes:
                continue
            open_.add(key)
            stack.append((node, True))
            for child in children:
                if id(child) in open_:
                    raise ConstructorError(None, None, "an alias refers to a node that contains it", mark)
                if id(child) not in sizes:
                    stack.append((child, False))
        return sizes[id(root)]

    def construct_yaml_int(self, node: Any) -> int:
        if len(node.value) > _LONGEST_INT:
            raise ConstructorError(
                None, None, f"an integer of {len(node.value)} characters is out of range", node.start_mark
            )
        return super().construct_yaml_int(node)


YamlReader.add_constructor("tag:yaml.org,2002:int", YamlReader.construct_yaml_int)  # type: ignore[type-var]


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _allowed_alias_ratio(total: int) -> float:
    """go-yaml's allowedAliasRatio: 99% of a small document may come from aliases, 10% of a
    huge one."""
    if total <= _ALIAS_LOW:
        return 0.99
    if total >= _ALIAS_HIGH:
        return 0.10
    return 0.99 - 0.89 * (total - _ALIAS_LOW) / (_ALIAS_HIGH - _ALIAS_LOW)


def safe_load(text: str | bytes) -> Any:
    """One YAML document, as ``yaml.safe_load`` reads it but within the same bounds (for test
    files, which may well use anchors: ``nodes: &ten``); raises PyYAML's errors or
    RecursionError."""
    reader = YamlReader(text)
    try:
        return reader.get_single_data()
    finally:
        reader.dispose()


def yaml_problem(err: yaml.YAMLError | RecursionError, path: str, what: str = "YAML") -> str:
    """PyYAML's error (several lines, naming ``"<unicode string>"``) as one: ``PATH:LINE:COL:
    invalid YAML: problem (context)``; ``what`` names the format ("YAML or JSON")."""
    if isinstance(err, RecursionError):
        return f"{path}: invalid {what}: nested too deeply"
    if isinstance(err, yaml.MarkedYAMLError):
        mark = err.problem_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else path
        problem = err.problem or "malformed"
        if err.context:
            problem += f" ({err.context})"
        return f"{where}: invalid {what}: {one_line(problem)}"
    return f"{path}: invalid {what}: {one_line(str(err)) or 'malformed'}"


def one_line(text: str) -> str:
    return text.splitlines()[0] if text else text


MAX_FILE_BYTES = 16 * 2**20  # a settings file or kubeconfig: far past any real one


def read_yaml_file(path: str, limit: int = MAX_FILE_BYTES, what: str = "YAML") -> Any:
    """The one YAML document of a small file (a ``--config`` file, a kubeconfig, node metrics),
    read within the same bounds as cluster files, at most ``limit`` bytes. Every problem is a
    ValueError of one line naming the file (and line and column where the parser knows them):
    the caller raises its own error with it. ``what`` names the format in that line."""
    try:
        with Path(path).open("rb") as file:
            data = file.read(limit + 1)
    except OSError as err:
        raise ValueError(f"{path}: cannot read: {err.strerror or err}") from None
    if len(data) > limit:
        raise ValueError(f"{path}: larger than {limit // 2**20} MiB")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: not UTF-8 text (byte {err.start} is invalid)") from None
    try:
        return safe_load(text)
    except (yaml.YAMLError, RecursionError) as err:
        raise ValueError(yaml_problem(err, path, what)) from None
