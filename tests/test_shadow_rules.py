"""Audit-mode (shadow) filters: ``audit filter NAME: ...`` and ``audit override filter NAME`` parse,
print and compose; such a filter is evaluated and reported (explain, audit) but never rejects a
node: placements are the same as without it. (The live count,
``rulesched_shadow_rejections_total``, is checked over HTTP in tests/test_explain_live.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rulesched.cli import main
from rulesched.lang import check_texts, load_rules_text
from rulesched.lang.frontend import ast
from rulesched.lang.frontend.format import format_source
from rulesched.lang.frontend.parse import parse_source
from rulesched.lang.frontend.source import Source

SHADOW = """extends "default"

audit filter small_only:
    pod.requests.cpu < 1
    else "only small pods (soon)"

audit override filter NodeAffinity
"""


def test_the_modifier_parses_prints_and_composes() -> None:
    tree, problems = parse_source(Source("s.rules", SHADOW))
    assert problems == []
    rule, partial = tree.items[1], tree.items[2]
    assert isinstance(rule, ast.Rule) and isinstance(partial, ast.PartialOverride)
    assert rule.audit and partial.audit
    out, _ = format_source(Source("s.rules", SHADOW))
    assert out is not None and "audit filter small_only:" in out and "audit override filter NodeAffinity" in out
    rules = load_rules_text({"s.rules": SHADOW})
    assert rules.shadow_filters == {"small_only", "NodeAffinity"}
    assert "NodeAffinity" not in [f.name for f in rules.filters]  # not enforced
    assert rules.shadow is not None and [f.name for f in rules.shadow.filters] == ["NodeAffinity", "small_only"]
    notes = [d.message for d in check_texts({"s.rules": SHADOW}).diagnostics]
    assert any("enforce -> audit" in m for m in notes)


def test_only_filters_take_the_modifier() -> None:
    _, problems = parse_source(Source("s.rules", "audit score x: 1\n"))
    assert problems and problems[0].span is not None and problems[0].span.line == 1


def test_enforcing_is_removing_one_word() -> None:
    enforced = load_rules_text({"s.rules": SHADOW.replace("audit filter", "filter")})
    assert "small_only" in [f.name for f in enforced.filters] and enforced.shadow_filters == {"NodeAffinity"}


def test_a_shadow_filter_never_changes_placements(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shadow = tmp_path / "shadow.rules"
    shadow.write_text('audit filter never:\n    false\n    else "audit says no"\n')
    assert main(["simulate", "examples/cluster.yaml", "--output", "json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert (
        main(["simulate", "examples/cluster.yaml", "--rules", "default", "--rules", str(shadow), "--output", "json"])
        == 0
    )
    shadowed = json.loads(capsys.readouterr().out)
    assert [(p["pod"], p["node"]) for p in shadowed["pods"]] == [(p["pod"], p["node"]) for p in plain["pods"]]
    # explain and audit show it
    main(
        [
            "explain",
            "shop/web-1",
            "--cluster",
            "examples/cluster.yaml",
            "--rules",
            "default",
            "--rules",
            str(shadow),
            "--output",
            "json",
        ]
    )
    answer = json.loads(capsys.readouterr().out)
    assert answer["feasible"] == 1 and answer["shadow"]["feasible"] == 0
    assert answer["shadow"]["reasons"][0]["nodes"] == 4
    code = main(["audit", "examples/cluster.yaml", "--rules", "default", "--rules", str(shadow), "--output", "json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0  # audit-mode rejections are no violations
    assert report["summary"]["shadow"] == 3 and report["summary"]["violating"] == 0


def test_diff_reports_audit_mode_rejections_and_running_pods_left_in_violation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    strict = tmp_path / "strict.rules"
    strict.write_text('filter no_batch_on_large when pod.namespace == "jobs":\n    node.name != "large-b"\n')
    shadow = tmp_path / "shadow.rules"
    shadow.write_text("audit filter never:\n    false\n")
    args = ["diff", "--old", "default", "--new", "default", "--new", str(strict), "--new", str(shadow)]
    assert main([*args, "examples/cluster.yaml", "--output", "json"]) == 1  # the running batch pods
    summary = json.loads(capsys.readouterr().out)["summary"]
    assert summary["newly_violating"] == ["jobs/batch-1", "jobs/batch-2"]
    assert summary["new"]["audit_mode_rejections"] == {"never": 4}  # every placement (4 of 5 pods), none changed
    assert summary["moved"] == 0 and summary["newly_unschedulable"] == 0
