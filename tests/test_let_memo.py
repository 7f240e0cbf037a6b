"""Lets kept by the values they read (rulesched.lang.evaluation.let_memo): which values may be
keys, and which lets share one table of kept answers (bodies alike up to their inputs). Whether
kept answers equal the interpreter's is tests/test_lang_properties.py's property
(tests/strategies.py's lets ``room``, ``room_now`` and ``thirds``); it fails when a key leaves an
input out."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rulesched.cluster.nodeinfo import NodeInfo
from rulesched.lang import RuleSet
from rulesched.lang.context import EvalContext
from rulesched.lang.evaluation.interp import Interpreter
from rulesched.lang.evaluation.let_memo import _rank, body_shape, compared_only_with, key_check, only_looped_over
from rulesched.lang.evaluation.stages import Staged
from rulesched.lang.frontend import ast
from rulesched.lang.types import BOOL, NUMBER, QUANTITY, STRING, ListOf, MapOf
from rulesched.model import Node, Pod
from tests.helpers.rules import agree, load


def test_only_values_equal_in_meaning_when_equal_are_keys() -> None:
    number, quantity, text, flag = key_check(NUMBER), key_check(QUANTITY), key_check(STRING), key_check(BOOL)
    assert number is not None and quantity is not None and text is not None and flag is not None
    assert number(3) and quantity(3000) and text("T4") and flag(True)
    assert not number(3.0) and not number(-0.0)  # (1.0 == 1 and -0.0 == 0.0 as keys)
    assert not number(True) and not flag(1)  # (True == 1 as keys)
    numbers = key_check(ListOf(NUMBER))
    assert numbers is not None
    assert numbers((1000, 190, 0)) and numbers(())
    assert not numbers((1000, 0.5)) and not numbers([1000])
    assert key_check(MapOf(NUMBER)) is None and key_check(ListOf(ListOf(NUMBER))) is None


# Three lets over a table and the cpus a node's pods ask: room and room_now compute one function of
# their inputs (the cpu left after the pod, or now), room_less another (< for <=).
SHAPES = (
    "let mix = table(w, cpu) [[1, 1000m], [2, 3000m]]\n"
    "let loads = collect(x.requests.cpu for x in node.pods)\n"
    "let left = node.free.cpu - pod.requests.cpu\n"
    "let left_now = node.free.cpu\n"
    "let room = sum(m.w for m in mix where left >= m.cpu) + count(q in loads where q <= left)\n"
    "let room_now = sum(m.w for m in mix where left_now >= m.cpu) + count(q in loads where q <= left_now)\n"
    "let room_less = sum(m.w for m in mix where left_now >= m.cpu) + count(q in loads where q < left_now)\n"
    "score a:\n    room\n"
    "score b:\n    room_now\n"
    "score c:\n    room_less\n"
)


def test_lets_alike_up_to_their_inputs_have_one_shape_and_others_not() -> None:
    checked = load(SHAPES)
    notes, lets = checked.notes, checked.lets
    room = body_shape(lets["room"].value, notes, ["left", "loads"])
    assert room == body_shape(lets["room_now"].value, notes, ["left_now", "loads"])
    assert room != body_shape(lets["room_now"].value, notes, ["loads", "left_now"])  # (inputs by position)
    assert room != body_shape(lets["room_less"].value, notes, ["left_now", "loads"])
    span = lets["left"].value.span
    one, one_float = (ast.Literal(ast.LiteralKind.NUMBER, v, span=span) for v in (1, 1.0))
    assert one == one_float and body_shape(one, notes, []) != body_shape(one_float, notes, [])


def test_lets_sharing_a_table_answer_as_the_interpreter_does() -> None:
    """room and room_now share kept answers (the same inputs where the pod asks no cpu), and
    room_less keeps its own: on a node whose pods ask exactly the cpu left, < and <= differ."""
    checked = load(SHAPES)
    rules, interp = RuleSet(checked), Interpreter(checked.notes, checked.lets)
    nodes = []
    for i, cpu in enumerate([4000, 6000]):
        node = NodeInfo(Node(f"n{i}", allocatable={"cpu": cpu, "pods": 110_000}), ())
        node.add_pod(Pod(f"r{i}", node_name=f"n{i}", requests={"cpu": 1000}))
        node.add_pod(Pod(f"s{i}", node_name=f"n{i}", requests={"cpu": (cpu - 1000) // 2}))  # (as much as is left)
        nodes.append(node)
    for asked in (0, 1000, 0):
        bound = rules.bind(Pod(f"p{asked}", requests={"cpu": asked}))
        agree(checked, interp, bound, nodes, SHAPES)
        a, b, c = bound.scores
        if not asked:
            assert [a.score(n) for n in nodes] == [b.score(n) for n in nodes]
            assert [b.score(n) for n in nodes] != [c.score(n) for n in nodes]


# Lets reading an int only against a constant table's column (and int constants): kept by where
# it falls among those values (let_memo.compared_only_with); read any other way, by its value.
RANKS = (
    "let mix = table(w, cpu) [[1, 1000m], [2, 3000m], [4, 3000m]]\n"
    "let left = node.free.cpu - pod.requests.cpu\n"
    "let under = sum(m.w for m in mix where left > m.cpu) + count(m in mix where m.cpu >= left or left < 500m)\n"
    "let read = sum(m.w for m in mix where left > m.cpu) + count(m in mix where m.cpu >= left + 1)\n"
    "score a:\n    under\n"
    "score b:\n    read\n"
)


def test_an_int_compared_only_with_a_table_column_is_ranked_among_its_values() -> None:
    checked = load(RANKS)
    lets = checked.lets
    mix = Interpreter(checked.notes, lets).let_values(["mix"], EvalContext(Pod("p")), None)[0]
    table = Staged(frozenset(), const=mix)
    assert compared_only_with(lets["under"].value, checked.notes, "left", lambda _: table) == (500, 1000, 3000)
    assert compared_only_with(lets["read"].value, checked.notes, "left", lambda _: table) is None


@given(st.lists(st.integers(-5, 5), min_size=1, max_size=4), st.integers(-7, 7), st.integers(-7, 7))
def test_ints_rank_alike_exactly_when_they_compare_alike_with_every_value(among: list[int], a: int, b: int) -> None:
    rank = _rank(tuple(sorted(set(among))))
    alike = all((a < t, a == t) == (b < t, b == t) for t in among)
    assert (rank(a) == rank(b)) == alike
    assert rank(1.0) == 1.0 and rank(True) is True  # (no key: evaluated, not looked up)


def test_ranked_lets_answer_as_the_interpreter_does_at_and_beside_the_values() -> None:
    """left at a table's value, one below and one above, on nodes whose pods leave it so: kept
    answers from one node must not be read for another that compares otherwise."""
    checked = load(RANKS)
    rules, interp = RuleSet(checked), Interpreter(checked.notes, checked.lets)
    nodes = [
        NodeInfo(Node(f"n{cpu}", allocatable={"cpu": cpu, "pods": 110_000}), ())
        for cpu in (499, 500, 501, 999, 1000, 1001, 2999, 3000, 3001, 5000)
    ]
    for asked in (0, 1, 0, 2):
        agree(checked, interp, rules.bind(Pod(f"p{asked}", requests={"cpu": asked})), nodes, RANKS)


# A loop in a loop's body that reads the pod and the node but not the outer loop's variable is
# computed once per (pod, node) (rulesched.lang.evaluation.compile, Compiler.code): kept with the
# node and its generation, so a node that changes, or another node, computes it afresh.
HOISTED = (
    "let mix = table(w, cpu) [[1, 1000m], [2, 3000m]]\n"
    "let free_after = collect(x.requests.cpu - pod.requests.cpu for x in node.pods)\n"
    "score a:\n    sum(m.w * number(sum(f for f in free_after where f > 0)) for m in mix where m.cpu > 0)\n"
    "score b:\n    sum(m.w * count(x in node.pods where x.requests.cpu >= pod.requests.cpu) for m in mix)\n"
    "score c:\n    sum(m.w * count(x in node.pods where x.requests.cpu + pod.requests.cpu >= m.cpu) for m in mix)\n"
)


def test_loops_hoisted_out_of_a_loop_answer_as_the_interpreter_does_as_nodes_change() -> None:
    checked = load(HOISTED)
    rules, interp = RuleSet(checked), Interpreter(checked.notes, checked.lets)
    nodes = [NodeInfo(Node(f"n{i}", allocatable={"cpu": 8000, "pods": 110_000}), ()) for i in range(2)]
    for step, asked in enumerate((0, 1000, 2000, 1000)):
        nodes[step % 2].add_pod(Pod(f"r{step}", node_name=f"n{step % 2}", requests={"cpu": 1000 * step}))
        bound = rules.bind(Pod(f"p{step}", requests={"cpu": asked}))
        agree(checked, interp, bound, nodes, HOISTED)
        nodes[0].add_pod(Pod(f"s{step}", node_name="n0", requests={"cpu": 3000}))  # (after the scores above)
        agree(checked, interp, bound, nodes, HOISTED)


# A list a let reads only by loops whose answer is the same in any order is keyed sorted
# (let_memo.only_looped_over): nodes whose pods ask alike in another order share an answer.
ORDERS = (
    "let loads = collect(x.requests.cpu - pod.requests.cpu for x in node.pods)\n"
    "let free = sum(q for q in loads where q > 0) + count(q in loads where q > 1000m) + max(q for q in loads)\n"
    "let scaled = sum(q * 2 for q in loads) + count(q in loads where q > 0)\n"
    "let first = loads[0] + count(q in loads where q > 0)\n"
    "score a:\n    number(free)\n"
    "score b:\n    number(scaled)\n"
    "score c:\n    number(first)\n"
)


def test_lists_read_only_by_order_free_loops_are_keyed_sorted() -> None:
    checked = load(ORDERS)
    lets, notes = checked.lets, checked.notes
    assert only_looped_over(lets["free"].value, notes, "loads")
    assert not only_looped_over(lets["scaled"].value, notes, "loads")  # (a sum of values made from them)
    assert not only_looped_over(lets["first"].value, notes, "loads")
    rules, interp = RuleSet(checked), Interpreter(checked.notes, checked.lets)
    nodes = []
    for i, asks in enumerate([(500, 3000, 0), (3000, 0, 500), (0, 500, 3000), (3000, 3000, 500)]):
        node = NodeInfo(Node(f"n{i}", allocatable={"cpu": 16000, "pods": 110_000}), ())
        for j, cpu in enumerate(asks):
            node.add_pod(Pod(f"r{i}{j}", node_name=f"n{i}", requests={"cpu": cpu}))
        nodes.append(node)
    for asked in (0, 500, 0):
        agree(checked, interp, rules.bind(Pod(f"p{asked}", requests={"cpu": asked})), nodes, ORDERS)
