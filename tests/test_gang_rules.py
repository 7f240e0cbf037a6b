"""The group being placed in the language: ``group.members``, ``group.min_count``, ``group.nodes``
(rulesched.lang.builtins.groups): type-checked, formatted back as written, and compiled closures
agreeing with the reference interpreter on clusters with members placed."""

from __future__ import annotations

import dataclasses

import pytest

from rulesched.cluster.store import ClusterStore
from rulesched.errors import RulesError
from rulesched.lang import load_rules_text
from rulesched.lang.context import EvalContext
from rulesched.lang.evaluation.interp import Interpreter
from rulesched.lang.frontend.format import format_source
from rulesched.lang.frontend.source import Source
from rulesched.model.groups import POD_GROUP_LABEL
from tests.upstream.harness import node, pod

RULES = """filter one_rack when group.min_count > 1:
    len(group.nodes) == 0 or node.labels["rack"] == group.nodes[0].labels["rack"]
    else "node is not in the rack of its gang"

score together when group.members > 0:
    100 * count(n in group.nodes where n.labels["rack"] == node.labels["rack"]) / group.members
"""


def _nodes() -> list:  # type: ignore[type-arg]
    return [
        node(f"n{i}", labels={"rack": f"r{i // 2}"}, allocatable={"cpu": "8", "memory": "8Gi", "pods": "110"})
        for i in range(6)
    ]


def _member(name: str, bound: str = "", group: str = "g") -> object:
    return pod(name, labels={POD_GROUP_LABEL: group}, node_name=bound)


def test_fmt_keeps_group_fields_as_written() -> None:
    formatted, _ = format_source(Source("x.rules", RULES))
    assert formatted in (None, RULES)  # None: nothing to change


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("group.size > 1", "the group has no field 'size'"),
        ("len(group.min_count) > 0", "argument 1 must be a list"),
        ('group.nodes[0] == "n1"', ""),
    ],
)
def test_group_fields_are_type_checked(body: str, message: str) -> None:
    with pytest.raises(RulesError) as err:
        load_rules_text({"x.rules": f"filter f:\n    {body}\n"})
    assert message in str(err.value)


@pytest.mark.parametrize("placed", [[], ["n0"], ["n0", "n1"], ["n2", "n0"], ["n5"]])
def test_compiled_agrees_with_interpreter(placed: list[str]) -> None:
    rules = load_rules_text({"x.rules": RULES})
    running = [_member(f"m{i}", bound=n) for i, n in enumerate(placed)] + [_member("other", "n3", group="h")]
    store = ClusterStore.build(_nodes(), running)  # type: ignore[arg-type]
    snapshot = store.snapshot()
    me = dataclasses.replace(_member("me"), gang=(4, 4))  # type: ignore[type-var]
    bound = rules.bind(me, snapshot)
    interp = Interpreter(rules.checked.notes, rules.checked.lets)
    ctx = EvalContext(me, snapshot)
    filters = [r for r in rules.checked.rules if r.name == "one_rack"]
    scores = [r for r in rules.checked.rules if r.name == "together"]
    assert interp.applies(filters[0], ctx) and [f.name for f in bound.filters] == ["one_rack"]
    racks = {f"r{int(n[1]) // 2}" for n in sorted(placed)[:1]}  # group.nodes: in node order
    for info in snapshot.nodes:
        expected = bool(interp.body(filters[0], ctx, info))
        assert bool(bound.filters[0].passes(info)) == expected
        assert expected == (not placed or info.labels["rack"] in racks)
        assert bound.scores[0].score(info) == interp.body(scores[0], ctx, info)
    bound.release()


def test_no_group_reads_zero() -> None:
    rules = load_rules_text({"x.rules": RULES})
    store = ClusterStore.build(_nodes(), [])  # type: ignore[arg-type]
    bound = rules.bind(pod("single"), store.snapshot())
    assert bound.filters == () and bound.scores == ()
