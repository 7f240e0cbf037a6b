"""DRA's CEL: device selectors compiled and evaluated as Kubernetes does (k8s.io/dynamic-resource-allocation/cel).

A selector is a CEL expression over one variable, ``device``: ``device.driver``,
``device.allowMultipleAllocations``, ``device.attributes[DOMAIN][ID]`` and
``device.capacity[DOMAIN][ID]``. An attribute or capacity named without a domain is the
driver's; a domain the device has nothing in reads as an empty map. Kubernetes' libraries are
there: ``quantity()`` and ``semver()`` (with their ``compareTo``, ``isLessThan``,
``isGreaterThan``, ``add``, ``sub``, ``asInteger``, ``major`` ...), ``isQuantity``,
``isSemver``, regular expressions' ``find``/``findAll``, the strings extension and ``cel.bind``.

The engine is Google's cel-cpp through ``cel-expr-python`` (why: docs/dra.md, "CEL"): it type-
checks at compile time, as cel-go does, and evaluates a selector in about 10 µs. Quantities and
versions are values of their own types (``kubernetes.Quantity``, ``kubernetes.Semver``, declared
as protobuf messages), so ``quantity("1") == 1`` is a compile error there as in Kubernetes.

Costs: CEL has no unbounded loop, and every comprehension runs over a list or map the device or
the expression holds; :mod:`rulesched.semantics.cel_cost` bounds an expression's worst case
before it is used (Kubernetes' limit, 1,000,000), so an expression that could exceed it is
refused like one that does not compile. Errors are :class:`CelError` values naming the
expression; the allocator turns them into errors naming the class or claim.

Compiling is done once per expression (:class:`CelCache`); a selector's verdict on a device is
kept per (device, expression) across allocations, as devices are immutable values.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cel_expr_python import cel as _cel
from cel_expr_python.ext import ext_bindings, ext_strings
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from rulesched.model.dra import SELECTOR_MAX_COST, Device
from rulesched.model.quantity import QuantityError, format_quantity, parse_quantity
from rulesched.model.semver import Semver, parse_semver
from rulesched.semantics.cel_cost import estimate_cost

__all__ = ["CelCache", "CelError", "Compiled", "device_matches"]


class CelError(Exception):
    """A selector that does not compile, may cost too much, or failed on a device."""


@dataclass(frozen=True, slots=True)
class Compiled:
    expression: str
    program: Any = None
    error: str = ""  # a compile error (the expression is then never evaluated)
    max_cost: int = 0


# --- the environment ---------------------------------------------------------------------------


def _messages() -> tuple[Any, Any, Any]:
    """A descriptor pool with the two value types, and their message classes."""
    fdp = descriptor_pb2.FileDescriptorProto(name="kubernetes_dra_cel.proto", package="kubernetes", syntax="proto3")
    for name in ("Quantity", "Semver"):
        message = fdp.message_type.add(name=name)
        message.field.add(name="s", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING, label=1)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    quantity = message_factory.GetMessageClass(pool.FindMessageTypeByName("kubernetes.Quantity"))
    semver = message_factory.GetMessageClass(pool.FindMessageTypeByName("kubernetes.Semver"))
    return pool, quantity, semver


@functools.lru_cache(maxsize=4096)
def _milli(text: str) -> int:
    return parse_quantity(text)


@functools.lru_cache(maxsize=4096)
def _version(text: str) -> Semver:
    found = parse_semver(text) or parse_semver(text, lenient=True)
    if found is None:  # (the constructors refuse such text before a value exists)
        raise ValueError(f"{text!r} is not a semantic version")
    return found


class _Env:
    """One compiled environment (building it takes a few milliseconds: once per process)."""

    def __init__(self) -> None:
        cel = _cel
        self.pool, self.Quantity, self.Semver = _messages()
        Q, V = cel.Type("kubernetes.Quantity"), cel.Type("kubernetes.Semver")
        S, N, B, D = cel.Type.STRING, cel.Type.INT, cel.Type.BOOL, cel.Type.DOUBLE
        Qm, Vm = self.Quantity, self.Semver

        def quantity(text: str) -> Any:
            try:
                _milli(text)
            except QuantityError as err:
                raise ValueError(f"quantity: {err}") from None
            return Qm(s=text)

        def is_quantity(text: str) -> bool:
            try:
                _milli(text)
            except QuantityError:
                return False
            return True

        def q(value: Any) -> int:
            return _milli(value.s)

        def cmp(a: int, b: int) -> int:
            return (a > b) - (a < b)

        def semver(text: str, lenient: bool = False) -> Any:
            found = parse_semver(text, lenient)
            if found is None:
                raise ValueError(f"semver: {text!r} is not a semantic version")
            return Vm(s=str(found))

        def v(value: Any) -> Semver:
            return _version(value.s)

        def as_integer(a: Any) -> int:
            milli = q(a)
            if milli % 1000:
                raise ValueError("cannot convert value to integer: it is fractional")
            return milli // 1000

        def find(text: str, pattern: str) -> str:
            m = re.search(pattern, text)
            return "" if m is None else m.group(0)

        def is_q(value: Any) -> bool:
            return isinstance(value, Qm)

        # cel-cpp keys functions' implementations by the kinds of their arguments, and both value
        # types are of the kind "message": an overload pair on (Quantity, Quantity) and
        # (Semver, Semver) shares one implementation, which looks at what it was given. The
        # declarations keep them apart for the type checker.
        def compare(a: Any, b: Any) -> int:
            return cmp(q(a), q(b)) if is_q(a) else v(a).compare(v(b))

        decls: dict[str, list[tuple[str, Any, list[Any]]]] = {
            "quantity": [("string_to_quantity", Q, [S])],
            "isQuantity": [("is_quantity_string", B, [S])],
            "semver": [("string_to_semver", V, [S]), ("string_bool_to_semver", V, [S, B])],
            "isSemver": [("is_semver_string", B, [S]), ("is_semver_string_bool", B, [S, B])],
            "compareTo": [("quantity_compareTo", N, [Q, Q]), ("semver_compareTo", N, [V, V])],
            "isLessThan": [("quantity_isLessThan", B, [Q, Q]), ("semver_isLessThan", B, [V, V])],
            "isGreaterThan": [("quantity_isGreaterThan", B, [Q, Q]), ("semver_isGreaterThan", B, [V, V])],
            "add": [("quantity_add", Q, [Q, Q]), ("quantity_add_int", Q, [Q, N])],
            "sub": [("quantity_sub", Q, [Q, Q]), ("quantity_sub_int", Q, [Q, N])],
            "asInteger": [("quantity_asInteger", N, [Q])],
            "isInteger": [("quantity_isInteger", B, [Q])],
            "asApproximateFloat": [("quantity_asApproximateFloat", D, [Q])],
            "sign": [("quantity_sign", N, [Q])],
            "major": [("semver_major", N, [V])],
            "minor": [("semver_minor", N, [V])],
            "patch": [("semver_patch", N, [V])],
            "find": [("string_find_string", S, [S, S])],
            "findAll": [("string_find_all_string", cel.Type.List(S), [S, S])],
        }
        members = {
            "compareTo",
            "isLessThan",
            "isGreaterThan",
            "add",
            "sub",
            "asInteger",
            "isInteger",
            "asApproximateFloat",
            "sign",
            "major",
            "minor",
            "patch",
            "find",
            "findAll",
        }
        impls: dict[str, Callable[..., Any]] = {
            "string_to_quantity": quantity,
            "is_quantity_string": is_quantity,
            "string_to_semver": semver,
            "string_bool_to_semver": semver,
            "is_semver_string": lambda t: parse_semver(t) is not None,
            "is_semver_string_bool": lambda t, lenient: parse_semver(t, lenient) is not None,
            "quantity_compareTo": compare,
            "quantity_isLessThan": lambda a, b: compare(a, b) < 0,
            "quantity_isGreaterThan": lambda a, b: compare(a, b) > 0,
            "quantity_add": lambda a, b: Qm(s=format_quantity(q(a) + q(b))),
            "quantity_add_int": lambda a, b: Qm(s=format_quantity(q(a) + b * 1000)),
            "quantity_sub": lambda a, b: Qm(s=format_quantity(q(a) - q(b))),
            "quantity_sub_int": lambda a, b: Qm(s=format_quantity(q(a) - b * 1000)),
            "quantity_asInteger": as_integer,
            "quantity_isInteger": lambda a: q(a) % 1000 == 0,
            "quantity_asApproximateFloat": lambda a: q(a) / 1000,
            "quantity_sign": lambda a: cmp(q(a), 0),
            "semver_major": lambda a: v(a).major,
            "semver_minor": lambda a: v(a).minor,
            "semver_patch": lambda a: v(a).patch,
            "string_find_string": find,
            "string_find_all_string": lambda t, p: [m.group(0) for m in re.finditer(p, t)],
        }
        functions = [
            cel.FunctionDecl(
                name,
                [cel.Overload(id_, result, params, is_member=name in members) for id_, result, params in overloads],
            )
            for name, overloads in decls.items()
        ]
        self.env = cel.NewEnv(
            descriptor_pool=self.pool,
            variables={"device": cel.Type.Map(S, cel.Type.DYN)},
            extensions=[ext_bindings.ExtBindings(), ext_strings.ExtStrings()],
            functions=functions,
            function_impls=impls,
        )
        self.bool_type, self.dyn_type = B, cel.Type.DYN

    def prepare(self, expression: str, cost_limit: int) -> Compiled:
        try:
            program = self.env.compile(expression)
        except Exception as err:  # cel-cpp reports syntax and type errors as exceptions
            return Compiled(expression, error=f"compilation failed: {_short(str(err))}")
        kind = program.return_type()
        if not (kind == self.bool_type or kind == self.dyn_type):
            return Compiled(expression, error=f"must evaluate to bool or the unknown type, not {kind.name().lower()}")
        cost = estimate_cost(expression)
        if cost > cost_limit:
            return Compiled(
                expression,
                error=f"estimated cost {cost} exceeds the limit of {cost_limit} (each comprehension multiplies its body)",
                max_cost=cost,
            )
        return Compiled(expression, program, max_cost=cost)

    def device_data(self, device: Device, driver: str) -> dict[str, Any]:
        """The ``device`` variable: attributes and capacity by domain (unqualified names are the driver's)."""
        attributes: dict[str, dict[str, Any]] = {}
        for name, attr in device.attributes.items():
            domain, _, ident = name.rpartition("/")
            value = attr.value
            if attr.kind == "version":
                value = self.Semver(s=value)
            elif attr.kind == "versions":
                value = [self.Semver(s=x) for x in value]
            elif attr.kind in ("ints", "bools", "strings"):
                value = list(value)
            attributes.setdefault(domain or driver, {})[ident] = value
        capacity: dict[str, dict[str, Any]] = {}
        for name, cap in device.capacity.items():
            domain, _, ident = name.rpartition("/")
            capacity.setdefault(domain or driver, {})[ident] = self.Quantity(s=format_quantity(cap.value))
        return {
            "driver": driver,
            "allowMultipleAllocations": bool(device.allow_multiple_allocations),
            "attributes": attributes,
            "capacity": capacity,
        }


def _short(message: str) -> str:
    """cel-cpp's message on one line, without its status prefix and source excerpt."""
    message = message.replace("INVALID_ARGUMENT: ", "")
    lines = [line for line in message.splitlines() if line.strip() and not line.lstrip().startswith("|")]
    return " ".join(line.strip() for line in lines).replace("ERROR: <input>:", "<input>:")


@functools.lru_cache(maxsize=1)
def _environment() -> _Env:
    return _Env()


_MISSING_KEY = re.compile(r'Key not found in map : "((?:[^"\\]|\\.)*)"')


def _evaluate(env: _Env, compiled: Compiled, data: dict[str, Any]) -> bool:
    """Run the program; a domain the device lacks reads as an empty map (Kubernetes' default
    map), by evaluating again with it added when a lookup missed it."""
    added = 0
    while True:
        value = compiled.program.eval(data={"device": data})
        kind = value.type().name().upper()
        if kind == "BOOL":
            return bool(value.value())
        if kind == "ERROR":
            message = str(value.value())
            missing = _MISSING_KEY.search(message)
            if missing is not None and added < 16:
                key = missing.group(1)
                grown = False
                for part in ("attributes", "capacity"):
                    if key not in data[part] and f'"{key}"' in compiled.expression:
                        data[part] = {**data[part], key: {}}
                        grown = True
                if grown:
                    added += 1
                    continue
                message = f"no such key: {key}"
            message = _short(message.replace("NOT_FOUND: ", "").replace("UNKNOWN: ", ""))
            if "no such key:" in message:  # (upstream's EnhanceRuntimeError)
                message += ". consider using CEL optional chaining (.? followed by orValue()) or guarding the check with has() for optional fields"
            raise CelError(message)
        raise CelError(f"CEL result of type {kind.lower().split('<')[0]} could not be converted to bool")


class CelCache:
    """Compiled selectors by expression, and their verdicts by (device, expression).

    One per scheduler (kube-scheduler's plugin keeps an LRU of compiled expressions); the
    verdicts are dropped whole past ``max_verdicts`` (devices change rarely, and a dropped
    verdict costs one evaluation)."""

    def __init__(self, cost_limit: int = SELECTOR_MAX_COST, max_verdicts: int = 200_000) -> None:
        self.cost_limit = cost_limit
        self.max_verdicts = max_verdicts
        self._compiled: dict[str, Compiled] = {}
        # (id(device), driver, expression) -> (device, verdict or error): the device is held so
        # that its id cannot be reused while the entry lives
        self._verdicts: dict[tuple[int, str, str], tuple[Device, bool | str]] = {}
        self.evaluations = 0

    def prepared(self, expression: str) -> Compiled:
        found = self._compiled.get(expression)
        if found is None:
            try:
                found = _environment().prepare(expression, self.cost_limit)
            except CelError as err:
                found = Compiled(expression, error=str(err))
            self._compiled[expression] = found
        return found

    def matches(self, expression: str, device: Device, driver: str) -> bool:
        """Whether the selector holds for the device; :class:`CelError` when it does not
        compile or fails on the device."""
        key = (id(device), driver, expression)
        found = self._verdicts.get(key)
        if found is not None:
            verdict = found[1]
        else:
            compiled = self.prepared(expression)
            if compiled.error:
                raise CelError(compiled.error)
            self.evaluations += 1
            env = _environment()
            try:
                verdict = _evaluate(env, compiled, env.device_data(device, driver))
            except CelError as err:
                verdict = str(err)
            if len(self._verdicts) >= self.max_verdicts:
                self._verdicts.clear()
            self._verdicts[key] = (device, verdict)
        if isinstance(verdict, str):
            raise CelError(verdict)
        return verdict


def device_matches(expression: str, device: Device, driver: str, cache: CelCache | None = None) -> bool:
    """One selector on one device (a fresh cache unless one is given)."""
    return (cache or CelCache()).matches(expression, device, driver)
