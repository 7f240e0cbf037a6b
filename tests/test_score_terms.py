"""`explain` shows a score's terms (issue 38): for a score built from lets, the lets its body read
(directly, then those they read) whose value depends on the node, with their values on each of
the best nodes (rulesched.lang.evaluation.terms), in the JSON (`scores.best[i].terms`) and the
table ("Score terms"). Constant lets (a table, a pod-only figure) are left out; device scores
have none; at most MAX_TERMS per rule; only the best TERM_NODES nodes are evaluated."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from rulesched.cli import main
from rulesched.cluster.store import ClusterStore
from rulesched.lang import EvalContext, ScoreTerms, load_rules_text
from rulesched.lang.evaluation.terms import MAX_TERMS
from rulesched.model.decode import decode_node, decode_pod
from rulesched.scheduler.why import TERM_NODES
from tests.helpers.explaining import cluster, node, pod

# a score in FGD's shape: a figure now, after the pod, and a sigmoid of their difference
RULES = """\
let spare = 1000

let free_now = number(node.free.cpu) * 1000

let free_after = free_now - number(pod.requests.cpu) * 1000

let wasted_now = free_now % spare

let wasted_after = free_after % spare

score packs weight 2:
    100 * sigmoid((wasted_now - wasted_after) / spare)
"""


def test_the_lets_a_score_reads_on_each_node() -> None:
    rules = load_rules_text({"t.rules": RULES})
    terms = ScoreTerms(rules.checked)
    # the body's lets first, then theirs; `spare` reads no node: never shown
    assert terms.names("packs") == ("wasted_now", "wasted_after", "free_now", "free_after")
    snapshot = ClusterStore.build(nodes=[decode_node(node("n1", cpu="2500m"))], pods=[]).snapshot()
    ctx = EvalContext(decode_pod(pod("p", cpu="700m")), snapshot)
    shown = {t.name: t.value for t in terms.terms("packs", ctx, snapshot.node_view("n1"))}
    assert shown == {"wasted_now": "500", "wasted_after": "800", "free_now": "2500", "free_after": "1800"}
    assert all(t.location.startswith("t.rules:") for t in terms.terms("packs", ctx, snapshot.node_view("n1")))


def test_scores_without_node_lets_and_device_scores_have_none() -> None:
    rules = load_rules_text(
        {
            "t.rules": "let k = 3\n\nscore flat:\n    k * 10\n\nscore plain:\n    number(node.free.cpu) / 1000\n\n"
            'let cores = number(node.free.cpu)\n\nscore gpu for device:\n    cores + number(device.free["milli"])\n'
        }
    )
    terms = ScoreTerms(rules.checked)
    assert terms.names("flat") == () and terms.names("plain") == () and terms.names("gpu") == ()


def test_a_list_of_table_rows_shows_its_rows() -> None:
    from rulesched.lang.evaluation.blame import show

    assert show([(1, "a"), (2, "b")], None) == '[(1, "a"), (2, "b")] (2 items)'
    assert show([(1, 2, 3, 4, 5)], None) == "[(1, 2, 3, 4, ...)] (1 items)"


def test_at_most_max_terms_per_rule() -> None:
    lets = "\n\n".join(f"let t{i} = number(node.free.cpu) + {i}" for i in range(MAX_TERMS + 4))
    body = " + ".join(f"t{i}" for i in range(MAX_TERMS + 4))
    rules = load_rules_text({"t.rules": f"{lets}\n\nscore many:\n    ({body}) / 1000\n"})
    assert ScoreTerms(rules.checked).names("many") == tuple(f"t{i}" for i in range(MAX_TERMS))


def test_explain_shows_the_terms_of_the_best_nodes(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rules = tmp_path / "packs.rules"
    rules.write_text('extends "default"\n\n' + RULES)
    nodes = [node(f"n{i}", cpu=f"{1000 + 300 * i}m") for i in range(5)]
    path = cluster(tmp_path, *nodes, pod("p", cpu="700m"))
    assert main(["explain", "default/p", "--cluster", path, "--rules", str(rules), "--output", "json"]) == 0
    a = json.loads(capsys.readouterr().out)
    best = a["scores"]["best"]
    weights = [r["rule"] for r in a["scores"]["rules"]]
    assert len(best) == 5
    assert [bool(s.get("terms")) for s in best] == [True] * TERM_NODES + [False] * (5 - TERM_NODES)
    for s in best[:TERM_NODES]:
        shown = {t["let"]: round(float(t["value"])) for t in s["terms"]["packs"]}
        cpu = 1000 + 300 * int(s["node"][1:])
        assert shown == {
            "wasted_now": cpu % 1000,
            "wasted_after": (cpu - 700) % 1000,
            "free_now": cpu,
            "free_after": cpu - 700,
        }
        # the score's value is what its terms make
        want = int(100 * (1 / (1 + math.exp(-(shown["wasted_now"] - shown["wasted_after"]) / 1000))))
        assert s["values"][weights.index("packs")] == want
        assert list(s["terms"])[-1] == "packs"  # (after the default set's, in rule order)
    assert main(["explain", "default/p", "--cluster", path, "--rules", str(rules)]) == 0
    out = capsys.readouterr().out
    table = out[out.index("Score terms") :].splitlines()
    assert table[0] == f"Score terms (the lets each score read, on the best {TERM_NODES} node(s) scoring differently):"
    assert table[1].split() == [s["node"] for s in best[:TERM_NODES]]
    at = next(i for i, line in enumerate(table) if line.split() == ["packs"])
    assert main(["explain", "default/p", "--cluster", path, "--rules", str(rules), "--output", "html"]) == 0
    html = capsys.readouterr().out
    assert "<h2>Score terms</h2>" in html and "<code>wasted_after</code>" in html
    assert [line.split()[0] for line in table[at + 1 : at + 5]] == [
        "wasted_now",
        "wasted_after",
        "free_now",
        "free_after",
    ]


def test_nodes_scoring_alike_show_their_terms_once(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Twins (same cpu) score alike: the terms go to the best and the next nodes scoring otherwise."""
    rules = tmp_path / "packs.rules"
    rules.write_text('extends "default"\n\n' + RULES)
    nodes = [node(f"n{i}", cpu=cpu) for i, cpu in enumerate(["1900m", "1900m", "1900m", "1000m", "1300m"])]
    path = cluster(tmp_path, *nodes, pod("p", cpu="700m"))
    assert main(["explain", "default/p", "--cluster", path, "--rules", str(rules), "--output", "json"]) == 0
    best = json.loads(capsys.readouterr().out)["scores"]["best"]
    with_terms = [s for s in best if s.get("terms")]
    assert len(with_terms) == TERM_NODES and len({tuple(s["values"]) for s in with_terms}) == TERM_NODES
    assert with_terms[0] == best[0] and sum(s["node"] in ("n0", "n1", "n2") for s in with_terms) == 1


def test_when_the_best_ten_are_twins_the_next_nodes_scoring_otherwise_follow(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A big cluster's best 10 often score alike: the best list goes on to the next nodes that
    score differently (TERM_NODES in all), with their terms, best first still."""
    rules = tmp_path / "packs.rules"
    rules.write_text('extends "default"\n\n' + RULES)
    twins = [node(f"twin-{i:02}", cpu="1900m") for i in range(12)]
    path = cluster(tmp_path, *twins, node("small", cpu="1000m"), node("mid", cpu="1300m"), pod("p", cpu="700m"))
    assert main(["explain", "default/p", "--cluster", path, "--rules", str(rules), "--output", "json"]) == 0
    best = json.loads(capsys.readouterr().out)["scores"]["best"]
    assert [s["node"].startswith("twin") for s in best] == [True] * 10 + [False] * (TERM_NODES - 1)
    assert [s["total"] for s in best] == sorted((s["total"] for s in best), reverse=True)
    with_terms = [s["node"] for s in best if s.get("terms")]
    assert with_terms == [best[0]["node"], *(s["node"] for s in best[10:])]


def test_simulate_explain_full_shows_the_terms_under_the_top_nodes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`simulate --explain-full`: each pod's top 3 nodes with the lets its scores read there, in
    the table (rows `rule: let`) and the JSON (`explanation.terms`); plain `--explain` keeps its
    compact table and costs nothing more."""
    rules = tmp_path / "packs.rules"
    rules.write_text('extends "default"\n\n' + RULES)
    nodes = [node(f"n{i}", cpu=f"{1000 + 300 * i}m") for i in range(5)]
    path = cluster(tmp_path, *nodes, pod("p", cpu="700m"))
    args = ["simulate", path, "--rules", str(rules)]
    assert main([*args, "--explain-full", "--output", "json"]) == 0
    explanation = json.loads(capsys.readouterr().out)["pods"][0]["explanation"]
    top = [n for n in explanation["scores"]][:TERM_NODES]
    assert list(explanation["terms"]) == top
    for name in top:
        shown = {t["let"]: round(float(t["value"])) for t in explanation["terms"][name]["packs"]}
        cpu = 1000 + 300 * int(name[1:])
        assert shown == {
            "wasted_now": cpu % 1000,
            "wasted_after": (cpu - 700) % 1000,
            "free_now": cpu,
            "free_after": cpu - 700,
        }
    assert main([*args, "--explain-full"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert [r[:2] for r in rows if r[:1] == ["packs:"]] == [
        ["packs:", "wasted_now"], ["packs:", "wasted_after"], ["packs:", "free_now"], ["packs:", "free_after"]
    ]  # fmt: skip
    assert main([*args, "--explain", "--output", "json"]) == 0
    assert "terms" not in json.loads(capsys.readouterr().out)["pods"][0]["explanation"]
    assert main([*args, "--explain"]) == 0
    assert "packs: " not in capsys.readouterr().out


def test_explain_shows_fgd_fragmentation_terms(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The bundled FGD rules on a small cluster of the trace's kind: the fragmentation lets
    (before and after the pod) are among the terms shown on the best nodes."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import openb
    import openb_to_k8s

    from tests.helpers.openb_cluster import NODES, trace

    w = openb.arrivals(trace(), NODES, 42)
    items = list(openb_to_k8s.objects(NODES, w.pods[:20], w.node_rank, "dra"))
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    shared = next(p for p in w.pods[:20] if p.num_gpu == 1 and p.gpu_milli < 1000)
    args = ["explain", f"openb/{shared.name}", "--cluster", str(path), "--rules", "gpu-fragmentation"]
    assert main([*args, "--output", "json"]) == 0
    best = json.loads(capsys.readouterr().out)["scores"]["best"]
    lets = {t["let"] for terms in best[0]["terms"].values() for t in terms}
    assert len([name for name in lets if "frag" in name]) >= 2, lets
