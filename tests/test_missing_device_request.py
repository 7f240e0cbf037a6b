"""A device request's `count` (issue 38's language gap): a request that leaves `count` out reads 1,
the default the API server gives it (resource.k8s.io ExactDeviceRequest: "If AllocationMode is
ExactCount and this field is not specified, the default is one"; `mode` defaults to ExactCount);
a request that is not there at all (an index past the list's end, a pod without claims) is the
empty record of docs/language.md's "Missing values": every field its zero, `count` 0 and `mode`
"". The compiled rules (through `simulate`) and the reference interpreter agree."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rulesched.cli import main
from rulesched.lang import EvalContext, load_rules_text
from rulesched.lang.evaluation.interp import Interpreter
from rulesched.semantics.dra_pod import with_claims
from rulesched.simulate.load import load_cluster
from tests.helpers.dra_files import CLAIMS, GPU_CLASS, gpus, node, pod, template, write

RULES = """\
score first_count:
    pod.resource_claims[0].requests[0].count * 10

score first_mode:
    if pod.resource_claims[0].requests[0].mode == "" then 50 else if pod.resource_claims[0].requests[0].mode == "ExactCount" then 20 else 0

score third_count:
    pod.resource_claims[0].requests[2].count * 10 + 5
"""


def test_count_reads_the_api_default_and_a_missing_request_reads_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rules = tmp_path / "r.rules"
    rules.write_text('extends "default"\n\n' + RULES)
    items = [node("n1"), GPU_CLASS, gpus("n1", 2), template()]  # the template's request gives no count
    items += [pod("gpu", resourceClaims=CLAIMS), pod("cpu")]
    path = write(tmp_path, items)
    assert main(["simulate", str(path), "--rules", str(rules), "--output", "json", "--explain-full"]) == 0
    rows = {r["pod"]: r for r in json.loads(capsys.readouterr().out)["pods"]}
    want = {
        "default/gpu": {"first_count": 10, "first_mode": 20, "third_count": 5},
        "default/cpu": {"first_count": 0, "first_mode": 50, "third_count": 5},
    }
    for key, scores in want.items():
        got = rows[key]["scores"]["n1"]
        assert {k: got[k] for k in scores} == scores, key
    # the reference interpreter reads the same
    checked = load_rules_text({"r.rules": RULES}).checked
    interp = Interpreter(checked.notes, checked.lets)
    objects = load_cluster([str(path)])
    snapshot = objects.store().snapshot()
    for p in objects.pending_pods:
        ctx = EvalContext(with_claims(p, snapshot.dra), snapshot)  # as binding the rules does
        values = {r.name: interp.body(r, ctx, snapshot.node_view("n1")) for r in checked.rules}
        assert values == want[p.key], p.key
