"""Tables (data a policy ships), sigmoid and exp, lets computed once per (pod, node), and what these cost:
the language features GPU fragmentation is written with (rules/gpu-fragmentation.rules; the
compiled-vs-interpreter property over them is tests/test_lang_properties.py, whose generated
rules loop over a table)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

from rulesched.cluster.nodeinfo import NodeInfo
from rulesched.lang import RuleSet, load_rules
from rulesched.lang.builtins import BUILTINS
from rulesched.lang.evaluation.interp import Interpreter
from rulesched.lang.frontend.files import check_paths, check_texts
from rulesched.lang.frontend.parse import parse_source
from rulesched.lang.frontend.printer import print_file
from rulesched.lang.frontend.source import Severity, Source
from rulesched.model import Node, Pod
from tests.helpers.rules import OVERFLOWS, agree, load

ROOT = Path(__file__).resolve().parents[1]

MIX = 'let mix = table(pods, cpu, name, tags) [[3, 500m, "a", ["x"]], [1, 2, "b", []], [-2, 1.5, "", ["x", "y"]]]\n'


def _errors(text: str) -> list[str]:
    loaded = check_texts({"t.rules": text})
    return [d.message for d in loaded.diagnostics if d.severity is Severity.ERROR]


def test_a_table_is_a_list_of_records_typed_by_its_columns(tmp_path: Path) -> None:
    path = tmp_path / "t.rules"
    path.write_text(
        MIX + 'score s: sum(m.pods * number(m.cpu) for m in mix where len(m.tags) > 0 and m.name != "")\n'
        'score n: len(mix) + count(m in mix where "y" in m.tags)\n',
        encoding="utf-8",
    )
    rules: RuleSet = load_rules([path])
    bound = rules.bind(Pod("p"))
    node = NodeInfo(Node("n1", allocatable={"cpu": 4000, "pods": 110_000}), ())
    assert [s.score(node) for s in bound.scores] == [1, 4]  # 3 x 0.5 truncated; 3 rows + 1


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("let t = table(a, b) [[1, 2], [3]]\nscore s: len(t)", "a row of this table has 2 cells, not 1"),
        ('let t = table(a) [[1], ["x"]]\nscore s: len(t)', "column 'a' holds number; this cell is string"),
        ("let t = table(a) [[pod.priority]]\nscore s: len(t)", "a table's cells are constants"),
        ("let t = table(a, a) [[1, 2]]\nscore s: len(t)", "a table's columns must have different names"),
        ("let t = table(a) [[1]]\nscore s: sum(r.b for r in t)", "table row has no field 'b'"),
    ],
)
def test_table_mistakes_are_located_errors(text: str, message: str) -> None:
    errors = _errors(text)
    assert any(message in e for e in errors), errors


def test_table_stays_a_name_where_it_is_not_a_table() -> None:
    """`table` becomes a keyword only before "(": rules naming a let or variable table still load."""
    assert _errors("let table = 3\nscore s: table + sum(1 for table2 in [1])") == []


def test_a_table_prints_back_to_the_same_tree() -> None:
    text = (ROOT / "rules" / "gpu-fragmentation.rules").read_text(encoding="utf-8")
    tree, problems = parse_source(Source("g.rules", text))
    assert problems == []
    again, problems = parse_source(Source("g.rules", print_file(tree)))
    assert problems == [] and again.items == tree.items


@pytest.mark.parametrize(
    ("x", "expected"),
    [(0, 0.5), (1, 1 / (1 + math.exp(-1))), (-1, 1 / (1 + math.exp(1))), (1e6, 1.0), (-1e6, 0.0), (10**400, 1.0)],
)
def test_sigmoid_is_total(x: float, expected: float) -> None:
    assert BUILTINS["sigmoid"].impl(x) == pytest.approx(expected)
    assert BUILTINS["sigmoid"].impl(-(10**400)) == 0.0


LARGEST_FLOAT = sys.float_info.max


@pytest.mark.parametrize(
    ("x", "expected"),
    [
        (0, 1.0),
        (1, math.e),
        (-1, 1 / math.e),
        (709, math.exp(709)),  # the largest whole argument e^x of which is a float
        (710, LARGEST_FLOAT),  # e^710 overflows: held at the largest float, never infinity
        (1e6, LARGEST_FLOAT),
        (10**400, LARGEST_FLOAT),  # an integer no float holds
        (math.inf, LARGEST_FLOAT),
        (-1e6, 0.0),
        (-(10**400), 0.0),
        (-math.inf, 0.0),
        (math.nan, 1.0),  # NaN reads as 0, as a score's value does
    ],
)
def test_exp_is_total(x: float, expected: float) -> None:
    assert BUILTINS["exp"].impl(x) == expected


@pytest.mark.parametrize("x", [0.0, 1e-9, 0.07, 1.0, 2.5, 5.0, 30.0])
def test_exp_is_what_fgd_plus_wrote_with_sigmoid(x: float) -> None:
    """FGD+ wrote exp(-x) as 1 / sigmoid(x) - 1 before the language had exp (0.07: a GPU the
    whole mix fits, rate 5 over 71 pods' worth of share)."""
    sigmoid = BUILTINS["sigmoid"].impl
    assert BUILTINS["exp"].impl(-x) == pytest.approx(1 / sigmoid(x) - 1, rel=1e-9, abs=1e-15)


@pytest.mark.parametrize(("body", "expected"), OVERFLOWS)
def test_overflowing_floats_have_an_answer(body: str, expected: int) -> None:
    """A float beyond a float's range (exp's, or a product's infinity) gives an answer, never an
    exception: held at the largest float where a whole number or quantity is needed, NaN 0."""
    checked = load(f"score s: {body}\n")
    rules, interp = RuleSet(checked), Interpreter(checked.notes, checked.lets)
    bound = rules.bind(Pod("p"))
    nodes = [
        NodeInfo(Node(f"n{i}", allocatable={"cpu": cpu, "pods": 110_000}), ()) for i, cpu in enumerate([1000, 4000])
    ]
    (score,) = bound.scores
    assert [score.score(n) for n in nodes] == [expected, expected]
    agree(checked, interp, bound, nodes, body)


# --- cost -----------------------------------------------------------------------------------


def _steps(text: str) -> dict[str, int]:
    loaded = check_texts({"t.rules": text})
    assert [d.message for d in loaded.diagnostics if d.severity is Severity.ERROR] == []
    assert loaded.checked is not None
    return {name: steps for (_, name), steps in loaded.checked.steps.items()}


def test_a_tables_length_is_known_when_the_rules_load() -> None:
    """A loop over a table costs its rows, not the 16 elements assumed of other lists."""

    def cost(rows: int) -> int:
        table = "let t = table(pods) [" + ", ".join(["[1]"] * rows) + "]\n"
        return _steps(table + "score s: sum(m.pods for m in t where m.pods > 0)")["s"]

    # each row: its literal (2 steps: the row and its cell), a step, the where (4), the value (2)
    assert cost(6) - cost(3) == cost(9) - cost(6) == 3 * (2 + 1 + 4 + 2)
    assert cost(1) < 16


def test_a_let_reading_the_pod_and_node_is_costed_once() -> None:
    once = "let busy = count(p in node.pods where p.priority > pod.priority)\n"
    one_use = _steps(once + "score s: busy")["s"]
    three_uses = _steps(once + "score s: busy + busy * busy")["s"]
    assert three_uses == one_use + 2 + 2  # two more lookups, two operators
    in_a_loop = _steps(once + "score s: count(q in node.pods where busy < 5)")["s"]
    assert in_a_loop < 110 * 10 + one_use  # the let once, a lookup per element


def test_a_loop_reading_the_node_alone_is_kept_per_node_and_costs_a_lookup() -> None:
    kept = _steps("score s: count(q in node.pods where count(p in node.pods where p.priority > 0) < 5)")["s"]
    assert kept == 4  # all of it reads the node alone: one lookup
    # what it costs to compute, once per node change, is bounded by the same limit
    errors = _errors("score s: count(q in node.pods where count(p in node.pods where p.priority > q.priority) < 5)")
    assert any("in what it keeps per node: 2 nested loops" in e for e in errors), errors


def test_the_gpu_fragmentation_rules_fit_the_limits() -> None:
    loaded = check_paths([ROOT / "rules" / "gpu-fragmentation.rules"])
    assert [d.render() for d in loaded.diagnostics if d.severity is Severity.ERROR] == []
    assert loaded.checked is not None
    steps = {name: s for (_, name), s in loaded.checked.steps.items()}
    assert 5_000 < steps["fgd"] <= 10_000  # 35 shapes x the node's devices, before and after
