"""Hostile rules text: whatever arrives (from a file or a ConfigMap), the front end answers with
located diagnostics, or a rule set that loads and runs, in bounded time; never another exception.

Generated pathological programs — deep nesting of every kind, long and doubling let chains,
huge literals, garbage bytes, valid fragments spliced at random — go through lint (parse and
check), load (compile) and, when they load, a simulation on examples/cluster.yaml with
``--explain`` and the formatter. Regression tests pin the three shapes of issue 22: a chain of 170
lets (was a RecursionError), 30 lets each doubling the one before (was exponential compile time)
and five nested aggregates over node.pods (was ~100 s per pod at 5,000 nodes).
"""

from __future__ import annotations

import contextlib
import io
import json
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rulesched.cli import main
from rulesched.errors import RulesError
from rulesched.lang.frontend.cost import MAX_SET_STEPS, MAX_STEPS
from rulesched.lang.frontend.files import check_texts
from rulesched.lang.frontend.format import format_source
from rulesched.lang.frontend.lets import MAX_EXPANDED_DEPTH
from rulesched.lang.frontend.parse import MAX_DEPTH, MAX_TOKENS
from rulesched.lang.frontend.source import Diagnostic, Severity, Source
from rulesched.lang.load import compile_loaded, load_rules_text

ROOT = Path(__file__).resolve().parents[1]
CLUSTER = str(ROOT / "examples" / "cluster.yaml")
# Modest example counts keep CI fast; the deadline is the "bounded time" (generous: CI machines
# are shared). The slowest inputs are just under the token limit, about 1 s each.
HOSTILE = settings(
    max_examples=25,
    deadline=timedelta(seconds=10),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def front_end(text: str | bytes, path: Path) -> list[Diagnostic]:
    """Lint, load and (when the rules load) simulate ``text``: the diagnostics, every one of
    them located; any exception but a one-line RulesError (not UTF-8, binary) fails the test."""
    try:
        loaded = check_texts({"h.rules": text})
    except RulesError as err:  # bytes that are not rules text at all: one line naming the key
        assert str(err).startswith("h.rules: ") and "\n" not in str(err)
        return []
    for d in loaded.diagnostics:
        d.render()
        if d.severity is Severity.ERROR:
            assert d.span is not None, d.render()  # file:line:col, with a caret
            assert d.location.startswith("h.rules:"), d.render()
    if loaded.ok:
        compile_loaded(loaded)
        text = loaded.sources[0].text
        _simulate(text, path)
        format_source(Source("h.rules", text))
    return list(loaded.diagnostics)


def _simulate(text: str, path: Path) -> None:
    rules = path / "h.rules"
    rules.write_text(text, encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["simulate", CLUSTER, "--rules", str(rules), "--output", "json", "--explain"])
    assert code == 0, err.getvalue()


# --- generated pathological programs --------------------------------------------------------

_WRAPS = [  # (opening, leaf, closing) of one level of nesting; a newline keeps lines short
    ("(\n", "1", ")\n"),
    ("-\n", "1", ""),
    ("not\n", "true", ""),
    ("if true then 1 else\n", "2", ""),
    ("abs(\n", "1", ")\n"),
    ("[\n", "", "]\n"),
    ("sum(\n", "1", " for x in [1])\n"),
    ("len(\n", "node.name", ")\n"),
    ("", "node.name", "[0]\n"),
    ("", "1", "+ 1\n"),
    ("", "node", ".labels\n"),
    ("count(x in\n", "node.pods", ")\n"),
]


@st.composite
def deep(draw: st.DrawFn) -> str:
    opening, leaf, closing = draw(st.sampled_from(_WRAPS))
    n = draw(st.one_of(st.integers(1, 3 * MAX_DEPTH), st.integers(1, 20_000)))
    kind = draw(st.sampled_from(["score s:", "filter f:", "let x =", "filter f when"]))
    tail = ": true" if kind.endswith("when") else ""
    return f"{kind}\n{opening * n}{leaf}\n{closing * n}{tail}\n"


_CHAIN_STEPS = [
    "{a} + 1",
    "{a} and true",
    "[{a}]",
    "-{a}",
    "if true then {a} else 0",
    "count(z in node.pods where {a})",
    "abs({a})",
]


@st.composite
def let_chains(draw: st.DrawFn) -> str:
    step = draw(st.sampled_from(_CHAIN_STEPS))
    n = draw(st.one_of(st.integers(1, 2 * MAX_EXPANDED_DEPTH), st.integers(1, 3_000)))
    base = draw(st.sampled_from(["1", "true", "node.name", "pod.priority", "x"]))
    lines = [f"let a0 = {base}"] + [f"let a{i} = " + step.format(a=f"a{i - 1}") for i in range(1, n)]
    use = draw(st.sampled_from(["score s: a{n}", "filter f: a{n} == a{n}", "filter f when a{n}: true", ""]))
    return "\n".join([*lines, use.format(n=n - 1)]) + "\n"


_DOUBLINGS = [
    "{a} + {a}",
    "{a} * {a}",
    "{a} == {a}",
    "if {a} == {a} then {a} else {a}",
    "[{a}, {a}]",
    "collect({a} for z{i} in [1, 2])",
    "max({a}, {a})",
    "{a} and {a}",
]


@st.composite
def doublings(draw: st.DrawFn) -> str:
    step = draw(st.sampled_from(_DOUBLINGS))
    n = draw(st.integers(1, 80))
    base = draw(st.sampled_from(["1", "node.name", '"xy"', "[1, 2]", "pod.priority", "count(p in node.pods)", "true"]))
    lines = [f"let a0 = {base}"] + [f"let a{i} = " + step.format(a=f"a{i - 1}", i=i) for i in range(1, n)]
    return "\n".join([*lines, f"filter f: a{n - 1} == a{n - 1}"]) + "\n"


@st.composite
def huge_literals(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["list", "string", "digits", "exponent", "quantity-text", "strings"]))
    if kind == "list":
        n = draw(st.integers(0, 40_000))
        items = [str(i) for i in range(n)]
        body = "[" + ",\n".join(",".join(items[i : i + 500]) for i in range(0, n, 500)) + "]"
        return f"filter f: pod.priority in {body}\n"
    if kind == "string":
        return f'filter f: node.name != "{"x" * draw(st.integers(0, 4_100))}"\n'
    if kind == "digits":
        digits = "9" * draw(st.integers(1, 4_100))
        op = draw(st.sampled_from(["*", "+", "//", "%", "/"]))
        return f'score s: {digits}\n {op} {digits}\nfilter f: string({digits} * {digits}) != ""\n'
    if kind == "exponent":
        exponent = draw(st.integers(-(10**10), 10**10))
        suffix = draw(st.sampled_from(["", "m", "Ki", "Gi", "E", "Ei", "n", "s", "ms", "min", "h"]))
        return f"filter f: number(node.allocatable.cpu) < number(1e{exponent}{suffix}) or true\n"
    if kind == "quantity-text":
        exponent = draw(st.integers(-(10**12), 10**12))
        return f'filter f: quantity("1e{exponent}") > 0 or true\nscore s: number(quantity("1e{exponent}"))\n'
    n = draw(st.integers(1, 10_000))
    return "filter f: node.name in [" + ",\n".join(f'"{i}"' for i in range(n)) + "]\n"


_WORDS = (
    "let filter score preempt disable extends override when weight normalize order else unresolvable if then "
    "and or not in for where true false count any all sum min max collect pod node victim x p "
    "pod.priority node.pods node.name node.labels pod.labels len abs has tolerated spread_ok "
    '+ - * / // % == != < <= > >= ( ) [ ] , . : = 1 0 500m 2Gi 30s 1e3 "a" "" # \\ @ { } ; \n'
).split(" ")


@st.composite
def fragments(draw: st.DrawFn) -> str:
    """Valid pieces in random order, or spliced into a real rule set."""
    words = draw(st.lists(st.sampled_from(_WORDS), max_size=300))
    text = " ".join(words)
    if draw(st.booleans()):
        base = (ROOT / "rules" / "default.rules").read_text(encoding="utf-8")
        at = draw(st.integers(0, len(base)))
        text = base[:at] + text + base[at:]
    return text


@HOSTILE
@given(deep())
def test_deep_nesting_gives_diagnostics_only(tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    front_end(text, tmp_path_factory.mktemp("h"))


@HOSTILE
@given(let_chains())
def test_let_chains_give_diagnostics_only(tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    front_end(text, tmp_path_factory.mktemp("h"))


@HOSTILE
@given(doublings())
def test_doubling_lets_give_diagnostics_only(tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    front_end(text, tmp_path_factory.mktemp("h"))


@HOSTILE
@given(huge_literals())
def test_huge_literals_give_diagnostics_only(tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    front_end(text, tmp_path_factory.mktemp("h"))


@HOSTILE
@given(st.one_of(st.binary(max_size=3_000), st.text(max_size=3_000)))
def test_garbage_gives_diagnostics_only(tmp_path_factory: pytest.TempPathFactory, data: str | bytes) -> None:
    front_end(data, tmp_path_factory.mktemp("h"))


@settings(HOSTILE, max_examples=50)
@given(fragments())
def test_shuffled_fragments_give_diagnostics_only(tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    front_end(text, tmp_path_factory.mktemp("h"))


# --- the shapes of issue 22 -------------------------------------------------------------------


def _codes(diagnostics: list[Diagnostic]) -> list[str]:
    return [d.code for d in diagnostics if d.severity is Severity.ERROR]


def _chain(n: int) -> str:
    return "\n".join(
        [
            "let a0 = node.allocatable.cpu",
            *(f"let a{i} = a{i - 1} + 1m" for i in range(1, n)),
            f"score s: number(a{n - 1})",
        ]
    )


def test_a_chain_of_170_lets_is_too_deep_where_it_crosses_the_limit(tmp_path: Path) -> None:
    started = time.thread_time()  # (CPU time: the check's cost, not the machine's load)
    diagnostics = front_end(_chain(170), tmp_path)
    assert time.thread_time() - started < 5
    (d,) = [d for d in diagnostics if d.severity is Severity.ERROR]
    assert d.code == "too-deep"
    # a0 (node.allocatable.cpu) nests 3 levels and each let adds one (its +): a126 is the first
    # deeper than 128, reported once, at its value
    assert d.render().splitlines()[:3] == [
        f"h.rules:127:12: error: let 'a126' nests 129 levels deep with the lets it uses; the limit is "
        f"{MAX_EXPANDED_DEPTH} [too-deep]",
        "    let a126 = a125 + 1m",
        "               ^^^^^^^^^",
    ]
    with pytest.raises(RulesError, match="h.rules:127:12: let 'a126' nests 129 levels deep"):
        load_rules_text({"h.rules": _chain(170)})  # what the ConfigMap reloader calls


def test_the_deepest_accepted_lets_load_on_a_thread_with_a_small_stack(tmp_path: Path) -> None:
    """The reloader compiles on a thread: the deepest accepted chain (125 lets, 128 levels) and
    60 aggregates nested through lets load on a 256 KiB stack."""
    nested = "\n".join(
        ["let b0 = sum(1 for y0 in node.pods)"]
        + [f"let b{i} = sum(b{i - 1} for y{i} in [1])" for i in range(1, 60)]
        + ["score t: b59"]
    )
    texts = {"a.rules": _chain(125), "b.rules": nested}
    failures: list[BaseException] = []

    def load() -> None:
        try:
            load_rules_text(texts)
        except BaseException as err:  # noqa: BLE001 - reported by the test
            failures.append(err)

    previous = threading.stack_size(256 * 1024)
    try:
        thread = threading.Thread(target=load)
        thread.start()
    finally:
        threading.stack_size(previous)
    thread.join()
    assert failures == []


def _doubling_chain(links: int) -> str:
    step = "if a{p} == a{p} then a{p} else a{p}"
    lines = ["let a0 = pod.priority", *(f"let a{i} = " + step.format(p=i - 1) for i in range(1, links))]
    return "\n".join([*lines, f"filter f: a{links - 1} != a{links - 1}", ""])


def test_doubling_lets_are_computed_once_and_bounded_in_size(tmp_path: Path) -> None:
    """Lets reading the pod alone, each using the one before four times. The checker counts each
    let once, so the compiled rules (pod stage) and the reference interpreter (explain's blame of
    the failing filter) compute each once; the stages that walk expressions with their lets
    substituted are bounded by the expanded size, so a long chain is refused where it first gets
    too large (the CI run of 2026-12-02 hung in the generated form of this case: sixty links,
    4^60 expressions to walk)."""
    (d,) = [d for d in front_end(_doubling_chain(60), tmp_path) if d.severity is Severity.ERROR]
    assert d.code == "too-large" and d.location.startswith("h.rules:9:"), d.render()
    assert "let 'a8' holds 174,762 expressions with the lets it uses; the limit is 50,000" in d.message
    started = time.thread_time()  # (a bound on termination, not a speed check: exponential never ends)
    rules = tmp_path / "h.rules"
    rules.write_text(_doubling_chain(7), encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["simulate", CLUSTER, "--rules", str(rules), "--output", "json", "--explain"])
    assert code == 0, err.getvalue()
    assert json.loads(out.getvalue())["summary"]["unschedulable"] > 0
    assert time.thread_time() - started < 60


def test_thirty_doubling_lets_are_too_costly_at_once(tmp_path: Path) -> None:
    text = "\n".join(
        ["let a0 = number(node.allocatable.cpu)", *(f"let a{i} = a{i - 1} + a{i - 1}" for i in range(1, 30))]
        + ["score s: a29"]
    )
    started = time.thread_time()  # (CPU time: the check's cost, not the machine's load)
    diagnostics = front_end(text, tmp_path)
    assert time.thread_time() - started < 5
    (d,) = [d for d in diagnostics if d.severity is Severity.ERROR]
    # (the expanded size is over its bound before the cost is: the chain is refused where it first
    # gets too large)
    assert d.render().splitlines()[0] == (
        "h.rules:15:11: error: let 'a14' holds 81,919 expressions with the lets it uses; the limit is 50,000 [too-large]"
    )


def test_five_nested_aggregates_over_node_pods_are_too_costly(tmp_path: Path) -> None:
    text = (
        "score s:\n"
        "  sum(sum(sum(sum(sum(1 for e in node.pods where e.priority > d.priority) for d in node.pods"
        " where d.priority > c.priority) for c in node.pods where c.priority > b.priority)"
        " for b in node.pods where b.priority > a.priority) for a in node.pods)\n"
    )
    (d,) = [d for d in front_end(text, tmp_path) if d.severity is Severity.ERROR]
    assert d.code == "too-costly"
    assert d.location == "h.rules:2:3"
    # (it reads the node alone: kept per node, computed once per node change, and bounded so)
    assert "score 's' costs up to 113,917,725,132 steps per node (limit 10,000) in what it keeps per node" in d.message
    assert "5 nested loops: sum over node.pods (110) x sum over node.pods (110) x" in d.message


def test_two_nested_loops_over_node_pods_are_too_costly_one_is_not(tmp_path: Path) -> None:
    one = 'filter f: count(p in node.pods where p.labels["app"] == pod.labels["app"] and p.priority > 0) < 3'
    two = "filter f: count(p in node.pods where count(q in node.pods where q.priority > p.priority) == 0) == 1"
    assert _codes(front_end(one, tmp_path)) == []
    assert _codes(front_end(two, tmp_path)) == ["too-costly"]


def test_a_let_is_counted_once_per_pod_and_node(tmp_path: Path) -> None:
    """A let reads no loop's variable: one of a loop over node.pods used inside another loop over
    node.pods is computed once per (pod, node) (kept per node when it reads the node alone) and
    costs a lookup at each use; a loop whose inner loop reads the outer's variable is a nested
    loop, and the caret points at it."""
    cached = "let busy = count(p in node.pods where p.priority > 0)\nfilter f: all(q in node.pods where busy < 5)\n"
    assert _codes(front_end(cached, tmp_path)) == []
    once = "let busy = count(p in node.pods where p.priority > pod.priority)\nfilter f: all(q in node.pods where busy < 5)\n"
    assert _codes(front_end(once, tmp_path)) == []
    text = "filter f: all(q in node.pods where count(p in node.pods where p.priority > q.priority) < 5)\n"
    (d,) = [d for d in front_end(text, tmp_path) if d.severity is Severity.ERROR]
    assert (
        d.render()
        .splitlines()[0]
        .startswith(
            "h.rules:1:11: error: filter 'f' costs up to 73,152 steps per node (limit 10,000) in what it keeps per node: "
            "2 nested loops: all over node.pods (110) x count over node.pods (110)"
        )
    ), d.render()


def test_the_set_as_a_whole_is_bounded(tmp_path: Path) -> None:
    rule = 'filter f{i}: count(p in node.pods where p.labels["a"] == pod.labels["{i}"]) < 3'
    n = MAX_SET_STEPS // 1100 + 1  # each costs about 1,100 steps
    (d,) = [d for d in front_end("\n".join(rule.format(i=i) for i in range(n)), tmp_path) if d.code == "too-costly"]
    assert d.message.startswith("the rule set costs up to ")
    assert "(limit 50,000; the costliest: filter 'f0' " in d.message


def test_huge_literals_are_refused_where_they_are(tmp_path: Path) -> None:
    with pytest.raises(RulesError, match=r"^h.rules: 2,000,017 bytes is too large for a rules file"):
        check_texts({"h.rules": "filter f: 1 in [" + ",".join(["1"] * 1_000_000) + "]\n"})
    items = "filter f: 1 in [" + ",\n".join(",".join(["1"] * 1000) for _ in range(900)) + "]\n"
    started = time.thread_time()  # (CPU time: the check's cost, not the machine's load)
    (d,) = front_end(items, tmp_path)
    assert time.thread_time() - started < 5
    assert d.code == "too-large" and d.span is not None and d.span.line == 50  # 2,000 tokens a line
    assert d.message == f"rules file has more than {MAX_TOKENS:,} tokens (words, numbers, symbols)"
    assert _codes(front_end("filter f: 1e999999999s > 1s", tmp_path)) == ["syntax"]
    assert _codes(front_end("filter f: node.free.cpu < 1e99999Ki", tmp_path)) == ["syntax"]
    # accepted, and they run: a quantity string too large reads as 0, a 6,000-digit number's text
    # is written out, a 9,000-digit score is held at int64, exp beyond a float's range and the
    # infinity after it are held at the largest float where a whole number is needed
    accepted = (
        'filter q: quantity("1e999999999") == 0\n'
        f"filter t: len(string({'9' * 3000}\n * {'9' * 3000})) == 6000\n"
        f"score big: {'9' * 3000}\n * {'9' * 3000}\n * {'9' * 3000}\n"
        "filter e: node.free.cpu < exp(1e9) * 2 and len(string(floor(exp(1e9) * 2))) == 309\n"
        "score e: floor(exp(1000 * number(node.free.cpu)) * 2 - exp(1e9) * 2) + exp(99999)\n"
    )
    assert _codes(front_end(accepted, tmp_path)) == []


def test_a_long_chain_of_extends_loads(tmp_path: Path) -> None:
    texts = {f"f{i:04d}.rules": f'extends "f{i + 1:04d}"\nlet l{i} = {i}\n' for i in range(2_000)}
    texts["f2000.rules"] = "score s: 1"
    load_rules_text(texts)


def test_the_cost_example_in_the_language_reference_is_what_lint_prints(tmp_path: Path) -> None:
    text = (
        "filter quiet_neighbours:\n"
        "    all(q in node.pods where count(p in node.pods where p.priority > q.priority) < 5)\n"
    )
    path = tmp_path / "costly.rules"
    path.write_text(text, encoding="utf-8")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["lint", str(path)]) == 1
    shown = out.getvalue().replace(str(tmp_path) + "/", "")
    reference = (ROOT / "docs" / "language.md").read_text(encoding="utf-8")
    assert shown in reference
    for limit in (f"{MAX_STEPS:,} steps", f"{MAX_SET_STEPS:,} steps", f"**{MAX_EXPANDED_DEPTH} levels**"):
        assert limit in reference
    assert f"**{MAX_TOKENS:,}\n  tokens**" in reference
