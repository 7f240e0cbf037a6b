"""The CEL libraries on PyPI compared for DRA's device selectors: conformance to Kubernetes' own
selector table and evaluation speed. The numbers behind the choice of cel-expr-python
(docs/dra.md, "CEL").

Conformance: upstream's DRA CEL table (tests/upstream/dra/cel_cases.jsonl, from
k8s.io/dynamic-resource-allocation's cel/compile_test.go) for the features kube-scheduler 1.37
enables: for each case, whether the library compiles what Kubernetes compiles, refuses what it
refuses, and gives the same verdict or error on the device. Each library gets the ``device``
variable as nested maps (attributes and capacity by domain) and no Kubernetes extension but what
it can take natively; rulesched's own layer over cel-expr-python (quantity and semver types,
the default-domain map, the cost bound) is measured beside it.
Speed: microseconds per evaluation of three typical selectors on one device (no caching).

Needs the other libraries, which the project does not depend on:
    .venv/bin/pip install cel-python common-expression-language
    .venv/bin/python benchmarks/bench_cel_libraries.py
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

CASES = Path(__file__).parent.parent / "tests" / "upstream" / "dra" / "cel_cases.jsonl"
SELECTORS = [
    'device.driver == "gpu.example.com"',
    'device.attributes["gpu.example.com"].model == "A100" && device.attributes["gpu.example.com"].numa == 1',
    'device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0',
]


def _applicable() -> list[dict[str, Any]]:
    out = []
    for line in CASES.read_text().splitlines()[1:]:
        case = json.loads(line)
        features = json.loads(case["features"]) if case["features"] else None
        if features is not None and (
            features.get("EnableListTypeAttributes") or not features.get("EnableConsumableCapacity")
        ):
            continue
        out.append(case)
    return out


def _plain_device(case: dict[str, Any]) -> dict[str, Any]:
    """The device as nested maps: attribute values as plain values, quantities as strings."""
    driver = case["driver"]
    attributes: dict[str, dict[str, Any]] = {}
    for name, attr in (case["attributes"] or {}).items():
        domain, _, ident = name.rpartition("/")
        value = next(iter(attr.values())) if attr else None
        attributes.setdefault(domain or driver, {})[ident] = value
    capacity: dict[str, dict[str, Any]] = {}
    for name, cap in (case["capacity"] or {}).items():
        domain, _, ident = name.rpartition("/")
        capacity.setdefault(domain or driver, {})[ident] = cap["value"]
    return {
        "driver": driver,
        "allowMultipleAllocations": bool(case["allowMultipleAllocations"]),
        "attributes": attributes,
        "capacity": capacity,
    }


Engine = tuple[Callable[[str], Any], Callable[[Any, dict[str, Any]], Any]]


def _engines() -> dict[str, Engine]:
    engines: dict[str, Engine] = {}
    try:
        from cel_expr_python import cel as cc
        from cel_expr_python.ext import ext_bindings, ext_strings

        env = cc.NewEnv(
            variables={"device": cc.Type.DYN}, extensions=[ext_bindings.ExtBindings(), ext_strings.ExtStrings()]
        )

        def cpp_run(program: Any, device: dict[str, Any]) -> Any:
            value = program.eval(data={"device": device})
            if value.type().name().upper() == "ERROR":
                raise RuntimeError(str(value.value()))
            return value.value()

        engines["cel-expr-python (cel-cpp) 0.1.3"] = (env.compile, cpp_run)
    except ImportError:
        pass
    try:
        import cel as rust

        engines["common-expression-language (cel-rust) 0.10.0"] = (rust.compile, lambda p, d: p.execute({"device": d}))
    except ImportError:
        pass
    try:
        import celpy

        penv = celpy.Environment()
        engines["cel-python 0.5.0"] = (
            lambda e: penv.program(penv.compile(e)),
            lambda p, d: p.evaluate({"device": celpy.json_to_cel(d)}),
        )
    except ImportError:
        pass
    return engines


def _rulesched() -> Engine:
    from rulesched.model.decode_dra import _attribute, _capacity
    from rulesched.model.dra import Device
    from rulesched.model.fields import Where
    from rulesched.semantics.cel import CelCache

    def compile_(expression: str) -> Any:
        cache = CelCache()
        compiled = cache.prepared(expression)
        if compiled.error:
            raise RuntimeError(compiled.error)
        return (cache, expression)

    devices: dict[int, Any] = {}

    def run(program: Any, case: dict[str, Any]) -> Any:
        cache, expression = program
        device = devices.get(id(case))
        if device is None:
            where = Where("bench", "case")
            device = devices[id(case)] = Device(
                "d",
                attributes={k: _attribute(v, where, k) for k, v in (case["attributes"] or {}).items()},
                capacity=_capacity({"capacity": case["capacity"]} if case["capacity"] else {}, where, ""),
                allow_multiple_allocations=case["allowMultipleAllocations"],
            )
        cache._verdicts.clear()  # (measure the evaluation, not the per-device cache)
        return cache.matches(expression, device, case["driver"])

    return compile_, run


def conformance(name: str, engine: Engine, native: bool) -> tuple[int, int]:
    compile_, run = engine
    cases = _applicable()
    right = 0
    for case in cases:
        try:
            program = compile_(case["expression"])
        except Exception:
            right += bool(case["expectCompileError"]) or "cost limit" in case["expectMatchError"]
            continue
        if case["expectCompileError"]:
            continue
        if "cost limit" in case["expectMatchError"] and not native:
            continue  # a library without a cost limit runs its 10^7 iterations: wrong, and slow
        try:
            got = run(program, case if native else _plain_device(case))
        except Exception:
            right += bool(case["expectMatchError"])
            continue
        is_bool = isinstance(got, bool) or type(got).__name__ == "BoolType"  # (cel-python's)
        right += not case["expectMatchError"] and is_bool and bool(got) == case["expectMatch"]
    return right, len(cases)


def speed(engine: Engine, native: bool) -> list[float]:
    compile_, run = engine
    device_case = {
        "driver": "gpu.example.com",
        "allowMultipleAllocations": False,
        "attributes": {"model": {"string": "A100"}, "numa": {"int": 1}},
        "capacity": {"memory": {"value": "80Gi"}},
    }
    device = device_case if native else _plain_device(device_case)
    out = []
    for expression in SELECTORS:
        try:
            program = compile_(expression)
            run(program, device)
        except Exception:
            out.append(float("nan"))
            continue
        n = 2000
        start = time.perf_counter()
        for _ in range(n):
            run(program, device)
        out.append((time.perf_counter() - start) / n * 1e6)
    return out


def main() -> None:
    rows = [(name, engine, False) for name, engine in _engines().items()]
    rows.append(("rulesched.semantics.cel (cel-expr-python + Kubernetes' extensions)", _rulesched(), True))
    print(f"{'library':70} {'conformance':>12}  us/eval for the 3 selectors (nan: cannot)")
    for name, engine, native in rows:
        right, total = conformance(name, engine, native)
        times = " ".join(f"{t:8.1f}" for t in speed(engine, native))
        print(f"{name:70} {right:>5}/{total:<6}  {times}")


if __name__ == "__main__":
    main()
