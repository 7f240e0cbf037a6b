"""The types of rule expressions, and how operators combine them.

Values at run time: ``bool``; ``number`` is an ``int`` or ``float``; ``quantity`` is an ``int`` of
milli-units (``500m`` is 500, ``2Gi`` is 2 * 2**30 * 1000); ``duration`` is a ``float`` of seconds;
``string`` is ``str``; lists are tuples or lists; maps are mappings with string keys; records are
the objects described in :mod:`rulesched.lang.schema`.

Numbers mix with quantities and durations: the number is read in the other side's unit, so
``node.free.cpu >= 2`` means two whole CPUs. The checker decides every coercion once
(:func:`binary`); the compiler and the reference interpreter both apply the decision as written.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Type:
    def __str__(self) -> str:  # pragma: no cover - overridden
        return "type"


@dataclass(frozen=True)
class Prim(Type):
    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class ListOf(Type):
    elem: Type

    def __str__(self) -> str:
        return f"list of {self.elem}"


@dataclass(frozen=True)
class MapOf(Type):
    """A map from strings to ``value``. ``resources`` maps allow ``.cpu``-style access."""

    value: Type
    resources: bool = False

    def __str__(self) -> str:
        return "resources" if self.resources else f"map of {self.value}"


@dataclass(frozen=True)
class Record(Type):
    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class TableRow(Record):
    """A row of a ``table(...)`` (rulesched.lang.frontend.ast.Table): its columns and their types."""

    columns: tuple[tuple[str, Type], ...] = ()


BOOL = Prim("bool")
NUMBER = Prim("number")
QUANTITY = Prim("quantity")
DURATION = Prim("duration")
STRING = Prim("string")
ANY = Prim("any")  # after an error: fits everywhere, so one mistake is reported once
NUMERIC = (NUMBER, QUANTITY, DURATION)
RESOURCES = MapOf(QUANTITY, resources=True)


def is_numeric(t: Type) -> bool:
    return t in NUMERIC or t == ANY


def fits(actual: Type, expected: Type) -> bool:
    """Whether a value of ``actual`` may stand where ``expected`` is wanted."""
    if actual == ANY or expected == ANY or actual == expected:
        return True
    if expected in NUMERIC and actual == NUMBER:
        return True  # a number is read in the expected unit
    if isinstance(actual, ListOf) and isinstance(expected, ListOf):
        return fits(actual.elem, expected.elem)
    if isinstance(actual, MapOf) and isinstance(expected, MapOf):
        return fits(actual.value, expected.value)
    return False


def zero(t: Type) -> object:
    """The value a missing map key or absent field reads as (docs/language.md, "Missing values")."""
    if t == BOOL:
        return False
    if t in NUMERIC:
        return 0
    if t == STRING:
        return ""
    if isinstance(t, ListOf):
        return ()
    if isinstance(t, MapOf):
        return {}
    return None


# --- coercions --------------------------------------------------------------------------------
# A coercion names how one operand is converted before the operator applies; None: unchanged.
TO_MILLI = "to_milli"  # number -> quantity (x1000)
TO_NUMBER = "to_number"  # quantity -> number (/1000)


@dataclass(frozen=True)
class BinaryInfo:
    """The checker's decision for one binary operator: result type and operand coercions."""

    result: Type
    left: str | None = None
    right: str | None = None
    kind: str = ""  # "q": quantity arithmetic (whole milli-units); "seq": list equality or joining


def binary(op: str, lt: Type, rt: Type) -> BinaryInfo | str:
    """Type a binary operator, or say (as a string) why the operands do not go together."""
    if op in ("and", "or"):
        if fits(lt, BOOL) and fits(rt, BOOL):
            return BinaryInfo(BOOL)
        return f"'{op}' needs booleans, not {lt} and {rt}"
    if op in ("in", "not in"):
        if isinstance(rt, ListOf) and (fits(lt, rt.elem) or fits(rt.elem, lt)):
            if lt == NUMBER and rt.elem == QUANTITY:
                return BinaryInfo(BOOL, TO_MILLI)  # 1 in [500m, 1]: whole units
            return BinaryInfo(BOOL)
        if isinstance(rt, MapOf) and fits(lt, STRING):
            return BinaryInfo(BOOL)
        if rt == STRING and fits(lt, STRING):
            return BinaryInfo(BOOL)
        if rt == ANY:
            return BinaryInfo(BOOL)
        return f"'{op}' needs a list, map or string on the right and a matching element, not {lt} and {rt}"
    if op in ("==", "!="):
        return _equality(op, lt, rt)
    if op in ("<", "<=", ">", ">="):
        if lt == STRING and rt == STRING:
            return BinaryInfo(BOOL)
        unit = _common_unit(lt, rt)
        if unit is None:
            return f"cannot compare {lt} with {rt}"
        return BinaryInfo(BOOL, *_to_unit(unit, lt, rt))
    return _arithmetic(op, lt, rt)


def _equality(op: str, lt: Type, rt: Type) -> BinaryInfo | str:
    if ANY in (lt, rt):
        return BinaryInfo(BOOL)
    if isinstance(lt, ListOf) and isinstance(rt, ListOf):
        if fits(lt, rt) or fits(rt, lt):
            return BinaryInfo(BOOL, kind="seq")  # lists compare by elements, whatever their container
        return f"cannot compare {lt} with {rt} using '{op}'"
    unit = _common_unit(lt, rt)
    if unit is not None:
        return BinaryInfo(BOOL, *_to_unit(unit, lt, rt))
    if lt == rt or fits(lt, rt) or fits(rt, lt):
        return BinaryInfo(BOOL)
    return f"cannot compare {lt} with {rt} using '{op}'"


def _common_unit(lt: Type, rt: Type) -> Type | None:
    if not (is_numeric(lt) and is_numeric(rt)):
        return None
    kinds = {t for t in (lt, rt) if t not in (NUMBER, ANY)}
    if len(kinds) > 1:
        return None  # a quantity is never a duration
    return kinds.pop() if kinds else NUMBER


def _to_unit(unit: Type, lt: Type, rt: Type) -> tuple[str | None, str | None]:
    if unit == QUANTITY:
        return (TO_MILLI if lt == NUMBER else None, TO_MILLI if rt == NUMBER else None)
    return (None, None)  # numbers and durations share their unit (seconds)


def _arithmetic(op: str, lt: Type, rt: Type) -> BinaryInfo | str:
    if op == "+" and lt == STRING and rt == STRING:
        return BinaryInfo(STRING)
    if op == "+" and isinstance(lt, ListOf) and isinstance(rt, ListOf) and (fits(lt, rt) or fits(rt, lt)):
        return BinaryInfo(lt if lt.elem != ANY else rt, kind="seq")
    if not (is_numeric(lt) and is_numeric(rt)):
        return f"'{op}' needs numbers, not {lt} and {rt}"
    if ANY in (lt, rt):
        return BinaryInfo(ANY)
    if lt == rt == NUMBER:
        return BinaryInfo(NUMBER)
    if op in ("+", "-", "%"):
        unit = _common_unit(lt, rt)
        if unit is None:
            return f"cannot {_VERB[op]} {lt} and {rt}"
        return BinaryInfo(unit, *_to_unit(unit, lt, rt), kind="q" if unit == QUANTITY else "")
    if op == "*":
        if NUMBER in (lt, rt):  # scaling a quantity or a duration
            return BinaryInfo(lt if rt == NUMBER else rt, kind="q" if QUANTITY in (lt, rt) else "")
        return f"cannot multiply {lt} by {rt}"
    # / and //
    if rt == NUMBER:  # 2Gi / 2 is 1Gi
        return BinaryInfo(lt, kind="q" if lt == QUANTITY else "")
    if lt == rt:  # a ratio of like amounts is a plain number
        return BinaryInfo(NUMBER)
    if lt == NUMBER and rt == QUANTITY:  # 100 / node.allocatable.pods: the quantity read as a number
        return BinaryInfo(NUMBER, None, TO_NUMBER)
    return f"cannot divide {lt} by {rt}"


_VERB = {"+": "add", "-": "subtract", "%": "take the remainder of"}
