"""Lets kept by the values they read (rulesched.lang.evaluation.let_memo): which values may be
keys, and which lets share one table of kept answers (bodies alike up to their inputs). Whether
kept answers equal the interpreter's is tests/test_lang_properties.py's property
(tests/strategies.py's lets ``room``, ``room_now`` and ``thirds``); it fails when a key leaves an
input out."""

from __future__ import annotations

from rulesched.cluster.nodeinfo import NodeInfo
from rulesched.lang import RuleSet
from rulesched.lang.evaluation.interp import Interpreter
from rulesched.lang.evaluation.let_memo import body_shape, key_check
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
