"""``no-resource-fit``: a rule set that never checks that pods fit is warned about, by lint
(unless it is meant for the extender) and once when ``simulate`` or ``run`` starts with it.

Issue 25's case: without ``extends "default"`` an 8-GPU pod went to a 4-GPU node, silently."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
import yaml

from rulesched.cli import main
from rulesched.lang.frontend.lint import LintSettings, lint
from rulesched.run.loop import Loop
from rulesched.run.settings import RunSettings
from tests.apiserver import TestApiServer

GPU = "nvidia.com/gpu"
MINE = "score pod_capacity weight 5:\n    100 - 100 * len(node.pods) / node.allocatable.pods\n"


def write(folder: Path, name: str, text: str) -> str:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def codes(*paths: str, target: str | None = None) -> list[str]:
    return [d.code for d in lint(LintSettings(paths, target=target)).diagnostics]


def test_a_set_without_a_fit_filter_is_warned_about_with_the_fix(tmp_path: Path) -> None:
    path = write(tmp_path, "mine.rules", MINE)
    result = lint(LintSettings((path,)))
    (warning,) = [d for d in result.diagnostics if d.code == "no-resource-fit"]
    assert warning.severity.value == "warning" and warning.location == path
    assert "pod.requests against node.free" in warning.message and "nor taints, nor node affinity" in warning.message
    assert 'extends "default"' in warning.suggestion and "# rulesched: extender" in warning.suggestion
    assert result.warnings == 1
    assert warning.render().startswith(f"{path}: warning: no filter checks that a pod fits")


def test_composed_with_the_defaults_or_fitting_by_itself_it_is_not(tmp_path: Path) -> None:
    assert codes(write(tmp_path, "a.rules", 'extends "default"\n\n' + MINE)) == []
    own = (
        'let gpus = pod.requests["nvidia.com/gpu"]\n'
        "filter fits: all(r in pod.requests where pod.requests[r] <= node.free[r])\n"
        'filter gpu: gpus <= node.allocatable["nvidia.com/gpu"]\n'
    )
    assert codes(write(tmp_path, "b.rules", own)) == []  # and through a let:
    assert codes(write(tmp_path, "c.rules", "let room = node.free.cpu >= pod.requests.cpu\nfilter f: room\n")) == []


def test_a_set_meant_for_the_extender_is_not(tmp_path: Path) -> None:
    marked = write(tmp_path, "ext.rules", "# rulesched: extender\n" + MINE)
    assert codes(marked) == []
    plain = write(tmp_path, "plain.rules", MINE)
    assert codes(plain, target="extender") == []
    assert codes(marked, target="scheduler") == ["no-resource-fit"]
    assert codes(write(tmp_path, "not.rules", "# rulesched: extender, maybe\n" + MINE)) == ["no-resource-fit"]


def test_the_bundled_extender_rules_are_marked_and_clean() -> None:
    folder = Path(__file__).resolve().parents[1] / "deploy" / "extender" / "rules"
    assert codes(str(folder)) == []
    assert codes(str(folder), target="scheduler") == ["no-resource-fit"]


def test_lint_cli_takes_for(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "mine.rules", MINE)
    assert main(["lint", "--strict", path]) == 1
    assert "[no-resource-fit]" in capsys.readouterr().out
    assert main(["lint", "--strict", "--for", "extender", path]) == 0
    assert capsys.readouterr().out == "1 file, 1 rule: 0 errors, 0 warnings\n"
    assert main(["lint", "--format", "json", path]) == 0
    (found,) = json.loads(capsys.readouterr().out)["diagnostics"]
    assert found["code"] == "no-resource-fit" and found["line"] == 0 and found["severity"] == "warning"


# --- the faces ---------------------------------------------------------------------------------


def gpu_cluster(tmp_path: Path) -> str:
    def node(name: str, gpus: str) -> dict[str, Any]:
        allocatable = {"cpu": "8", "memory": "32Gi", "pods": "110", GPU: gpus}
        return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "status": {"allocatable": allocatable}}

    container = {"name": "train", "image": "x", "resources": {"requests": {GPU: "8"}, "limits": {GPU: "8"}}}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "train", "namespace": "ml"},
        "spec": {"containers": [container]},
    }
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump({"kind": "List", "items": [node("small", "4"), pod]}), encoding="utf-8")
    return str(path)


def test_simulate_warns_once_and_the_defaults_keep_the_pod_off(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    cluster = gpu_cluster(tmp_path)
    mine = write(tmp_path, "mine.rules", MINE)
    with caplog.at_level(logging.WARNING):
        assert main(["simulate", cluster, "--rules", mine, "--output", "json"]) == 0
    placed = json.loads(capsys.readouterr().out)["pods"][0]["node"]
    assert placed == "small"  # what issue 25 saw: 8 GPUs asked, 4 there
    warnings = [r.getMessage() for r in caplog.records if "no-resource-fit" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].startswith(f"{mine}: no filter checks")
    assert 'extends "default"' in warnings[0] and "rulesched: extender" not in warnings[0]
    caplog.clear()
    composed = write(tmp_path, "composed.rules", 'extends "default"\n\n' + MINE)
    with caplog.at_level(logging.WARNING):
        assert main(["simulate", cluster, "--rules", composed, "--output", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["pods"][0]["node"] is None
    assert not [r for r in caplog.records if "no-resource-fit" in r.getMessage()]


def test_run_warns_once_at_startup(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    mine = write(tmp_path, "mine.rules", MINE)
    server = TestApiServer()
    try:
        with caplog.at_level(logging.WARNING):
            loop = Loop(RunSettings(kubeconfig=server.kubeconfig(str(tmp_path / "kubeconfig")), rules=(mine,)))
        loop.workers.shutdown(wait=False)
        warnings = [r for r in caplog.records if "no-resource-fit" in r.getMessage()]
        assert len(warnings) == 1 and getattr(warnings[0], "rules", "") == loop.rules.digest
    finally:
        server.stop()
