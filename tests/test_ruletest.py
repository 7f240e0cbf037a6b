"""``rulesched test``: the shipped rule tests pass; broken cases fail naming file and case;
malformed files are errors naming file and field; JSON output; ties; rule-set selection."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from rulesched.cli import main

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "rules" / "examples"

POLICY = """extends "default"

filter no_blue when pod.labels["color"] == "blue":
    node.labels["color"] != "blue"
    else "node is blue"
"""


def node(name: str, cpu: str = "4", labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}},
    }


def pod(name: str, cpu: str = "1", labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": cpu}}}]},
    }


NODES = [node("small", cpu="2"), node("large", cpu="8", labels={"color": "blue"})]


def write_suite(folder: Path, cases: list[dict[str, Any]], name: str = "policy.test.yaml", **top: Any) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    if not any(folder.glob("*.rules")) and "rules" not in top:
        (folder / "policy.rules").write_text(POLICY)
    path = folder / name
    path.write_text(yaml.safe_dump({**top, "nodes": NODES, "cases": cases}, sort_keys=False))
    return path


def run(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    code = main(["test", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


# --- the shipped tests --------------------------------------------------------------------------------


def test_shipped_rule_tests_pass(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, ROOT / "rules")
    assert code == 0, out
    assert "FAIL" not in out and "ERROR" not in out
    passed = int(out.splitlines()[-1].split()[0])
    assert out.splitlines()[-1] == f"{passed} passed, 0 failed"
    assert passed >= 30


def test_every_rule_set_ships_tests() -> None:
    assert (ROOT / "rules" / "default.test.yaml").is_file()
    for folder in sorted(p for p in EXAMPLES.iterdir() if p.is_dir()):
        if (folder / "policy.rules").is_file():
            assert (folder / "policy.test.yaml").is_file(), folder
        else:  # a library of standalone sets (gpu-baselines): a test file for each
            sets = [p for p in folder.glob("*.rules") if "# rulesched: standalone" in p.read_text()]
            assert sets, folder
            for rules in sets:
                assert rules.with_suffix(".test.yaml").is_file(), rules


def test_default_tests_cover_the_default_profile(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, ROOT / "rules" / "default.test.yaml", "--output", "json")
    assert code == 0
    cases = json.loads(out)["cases"]
    text = (ROOT / "rules" / "default.test.yaml").read_text()
    for reason in (
        "Insufficient cpu",
        "untolerated taint",
        "node affinity/selector",
        "were unschedulable",
        "topology spread constraints",
        "pod anti-affinity rules",
        "NodeResourcesFit:",
        "NodeResourcesBalancedAllocation:",
        "winner:",
    ):
        assert reason in text, reason
    assert all(case["passed"] for case in cases)


# --- failures ----------------------------------------------------------------------------------------------


def test_broken_cases_fail_naming_file_and_case(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_suite(
        tmp_path / "team",
        [
            {"name": "good", "pod": pod("p", cpu="4"), "expect": {"feasible": ["large"], "winner": "large"}},
            {"name": "wrong winner", "pod": pod("p"), "expect": {"winner": "small"}},
            {
                "name": "wrong reason",
                "pod": pod("p", labels={"color": "blue"}),
                "expect": {"reasons": {"large": ["Insufficient cpu"]}},
            },
            {"name": "wrong feasible set", "pod": pod("p", cpu="4"), "expect": {"feasible": ["small", "large"]}},
        ],
    )
    code, out, _ = run(capsys, tmp_path)
    assert code == 1
    lines = out.splitlines()
    assert lines[-1] == "1 passed, 3 failed"
    fails = [line for line in lines if line.startswith("FAIL ")]
    assert len(fails) == 3
    winner, reason, feasible = fails
    # the pod fits both nodes; large (8 cpus) has more room left, so LeastAllocated prefers it
    assert winner.startswith(f"FAIL {path}: wrong winner: winner: expected small, got large (totals: large ")
    assert reason == (f'FAIL {path}: wrong reason: reasons.large: expected ["Insufficient cpu"], got ["node is blue"]')
    assert feasible == (
        f"FAIL {path}: wrong feasible set: feasible: expected [large, small], got [large] "
        "(small failed: Insufficient cpu)"
    )


def test_scores_preemption_and_unschedulable_mismatches(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_suite(
        tmp_path,
        [
            {
                "name": "scores",
                "pod": pod("p", cpu="4"),
                "expect": {"scores": {"large": {"NodeResourcesFit": 1, "missing_rule": 2}, "small": {"total": 0}}},
            },
            {"name": "fits", "pod": pod("p"), "expect": {"unschedulable": True, "nominated": "small"}},
        ],
    )
    code, out, _ = run(capsys, tmp_path, "--output", "json")
    assert code == 1
    cases = {c["name"]: c for c in json.loads(out)["cases"]}
    scores = cases["scores"]["failures"]
    # LeastAllocated: cpu (8 - 4) / 8 = 50, memory (8Gi - 200Mi default request) / 8Gi = 97
    assert "scores.large.NodeResourcesFit: expected 1, got 73" in scores
    assert any(f.startswith("scores.large.missing_rule: expected 2, got no such score (applied: ") for f in scores)
    assert "scores.small: not scored (it failed a filter: Insufficient cpu)" in scores
    fits = cases["fits"]["failures"]
    assert fits == [
        "unschedulable: expected true, got feasible nodes [large, small]",
        "nominated: expected small, got none (the pod fits without preemption)",
    ]


def test_unresolvable_expectations(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``unresolvable`` lists exactly the filtered nodes whose failure is marked unresolvable:
    with the default rules a request above a node's allocatable is, one that only does not fit
    beside the running pods is not."""
    running = {**pod("busy", cpu="7"), "spec": {**pod("busy", cpu="7")["spec"], "nodeName": "large"}}
    write_suite(
        tmp_path,
        [
            {"name": "right", "pod": pod("p", cpu="4"), "pods": [running], "expect": {"unresolvable": ["small"]}},
            {"name": "wrong", "pod": pod("p", cpu="4"), "pods": [running], "expect": {"unresolvable": []}},
        ],
        rules=["default"],
    )
    code, out, _ = run(capsys, tmp_path, "--output", "json")
    assert code == 1
    cases = {c["name"]: c for c in json.loads(out)["cases"]}
    assert cases["right"]["passed"], cases["right"]["failures"]
    assert cases["right"]["got"]["unresolvable"] == ["small"]
    assert cases["wrong"]["failures"] == ["unresolvable: expected [], got [small]"]


# --- ties ---------------------------------------------------------------------------------------------------


def test_a_tie_passes_only_when_the_test_expects_the_tie(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    twins = [node("twin-1"), node("twin-2")]
    path = tmp_path / "tie.test.yaml"
    (tmp_path / "policy.rules").write_text(POLICY)
    cases = [
        {"name": "one of the twins", "pod": pod("p"), "nodes": twins, "expect": {"winner": "twin-1"}},
        {"name": "the tie", "pod": pod("p"), "nodes": twins, "expect": {"winner": ["twin-2", "twin-1"]}},
    ]
    path.write_text(yaml.safe_dump({"cases": cases}))
    code, out, _ = run(capsys, path)
    assert code == 1
    (fail,) = [line for line in out.splitlines() if line.startswith("FAIL")]
    assert fail.startswith(
        f"FAIL {path}: one of the twins: winner: expected twin-1, got a tie between [twin-1, twin-2]"
    )
    assert "write winner: [twin-1, twin-2] to expect the tie" in fail
    assert out.splitlines()[-1] == "1 passed, 1 failed"


# --- errors ------------------------------------------------------------------------------------------------


def test_a_malformed_file_is_one_error_line_naming_file_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_suite(tmp_path, [{"name": "typo", "pod": pod("p"), "expect": {"winer": "large"}}])
    code, out, err = run(capsys, path)
    assert code == 2
    assert out.splitlines() == [
        f"ERROR {path}: case 'typo': expect.winer: unknown field; did you mean 'winner'?",
        "0 passed, 0 failed, 1 error",
    ]
    assert err == ""


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ({"name": "n", "pod": pod("p"), "expect": {"feasible": ["nowhere"]}}, "case 'n': expect.feasible[0]: no node"),
        ({"name": "n", "pod": pod("p"), "expect": {}}, "case 'n': expect: expected a mapping of checks"),
        ({"name": "n", "pod": pod("p")}, "case 'n': expect: missing"),
        ({"pod": pod("p"), "expect": {"winner": "large"}}, "cases[0].name: expected the case's name"),
        (
            {"name": "n", "pod": pod("p"), "expect": {"unresolvable": ["nowhere"]}},
            "case 'n': expect.unresolvable",
        ),
        (
            {"name": "n", "pod": pod("p"), "expect": {"unschedulable": "yes"}},
            "case 'n': expect.unschedulable: expected true or false",
        ),
        (
            {"name": "n", "pod": pod("p"), "expect": {"scores": {"large": {"NodeResourcesFit": "high"}}}},
            "case 'n': expect.scores.large.NodeResourcesFit: expected a whole number",
        ),
        (
            {
                "name": "n",
                "pod": {"metadata": {"name": "p"}, "spec": {"containers": "x"}},
                "expect": {"winner": "large"},
            },
            "case 'n': pod: Pod default/p: spec.containers",
        ),
        (
            {"name": "n", "pod": pod("p"), "pods": [pod("running")], "expect": {"winner": "large"}},
            "case 'n': pods[0]: Pod default/running: spec.nodeName: missing",
        ),
    ],
)
def test_malformed_cases(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: dict[str, Any], message: str
) -> None:
    path = write_suite(tmp_path, [case])
    code, out, _ = run(capsys, path)
    assert code == 2
    error = out.splitlines()[0]
    assert error.startswith(f"ERROR {path}: {message}"), error


def test_invalid_yaml_names_line_and_column(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "policy.rules").write_text(POLICY)
    path = tmp_path / "bad.test.yaml"
    path.write_text("cases:\n  - name: x\n    pod: {metadata: {name: p}\n")
    code, out, _ = run(capsys, path)
    assert code == 2
    assert out.splitlines()[0].startswith(f"ERROR {path}:4:1: invalid YAML: ")


def test_a_broken_file_in_a_folder_does_not_stop_the_others(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_suite(tmp_path / "a", [{"name": "ok", "pod": pod("p"), "expect": {"feasible": ["small", "large"]}}])
    broken = tmp_path / "b" / "broken.test.yaml"
    broken.parent.mkdir()
    broken.write_text("cases: 3\n")
    write_suite(tmp_path / "c", [{"name": "bad", "pod": pod("p"), "expect": {"winner": "small"}}])
    code, out, _ = run(capsys, tmp_path)
    assert code == 2
    lines = out.splitlines()
    assert lines[0] == f"ERROR {broken}: rules: no .rules files next to the test file; name them with 'rules:'"
    assert lines[1].startswith(f"FAIL {tmp_path / 'c' / 'policy.test.yaml'}: bad: winner: expected small")
    assert lines[-1] == "1 passed, 1 failed, 1 error"


def test_rules_that_do_not_load_are_an_error_for_that_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "policy.rules").write_text("filter f: nope\n")
    path = write_suite(tmp_path, [{"name": "n", "pod": pod("p"), "expect": {"winner": "large"}}])
    code, out, _ = run(capsys, path)
    assert code == 2
    assert out.splitlines()[0].startswith(f"ERROR {path}: rules: {tmp_path / 'policy.rules'}:1:11: ")


def test_missing_paths_and_empty_folders_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, tmp_path / "nowhere")
    assert code == 2 and err.strip() == f"rulesched: {tmp_path / 'nowhere'}: no such file or folder"
    code, _, err = run(capsys, tmp_path)
    assert code == 2 and err.strip() == f"rulesched: {tmp_path}: no *.test.yaml files in this folder"


# --- JSON ----------------------------------------------------------------------------------------------------


def test_json_output_has_every_case(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_suite(
        tmp_path,
        [
            {"name": "passes", "pod": pod("p", cpu="4"), "expect": {"winner": "large"}},
            {"name": "fails", "pod": pod("p", cpu="4"), "expect": {"winner": "small"}},
        ],
    )
    code, out, _ = run(capsys, path, "--output", "json")
    assert code == 1
    document = json.loads(out)
    assert set(document) == {"cases", "errors", "summary"}
    assert document["summary"] == {"passed": 1, "failed": 1, "errors": 0}
    assert document["errors"] == []
    first, second = document["cases"]
    assert {"file", "name", "passed", "failures", "got"} <= set(first)
    assert first["file"] == str(path) and first["name"] == "passes" and first["passed"] is True
    assert first["failures"] == []
    assert second["passed"] is False and second["failures"][0].startswith("winner: expected small, got large")
    got = first["got"]
    assert got["feasible"] == ["large"] and got["winner"] == "large"
    assert got["filtered"] == {"small": ["Insufficient cpu"]}
    assert got["scores"]["large"]["total"] > 0


def test_json_output_lists_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_suite(tmp_path, [{"name": "n", "pod": pod("p"), "expect": {"feasible": "large"}}])
    code, out, _ = run(capsys, path, "--output", "json")
    assert code == 2
    document = json.loads(out)
    assert document["cases"] == []
    assert document["errors"] == [
        {
            "file": str(path),
            "error": f"{path}: case 'n': expect.feasible: expected a list of node names, got the string 'large'",
        }
    ]
    assert document["summary"] == {"passed": 0, "failed": 0, "errors": 1}


# --- choosing the rule set ------------------------------------------------------------------------------


def test_rules_key_and_rules_option_choose_the_set(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "blue.rules").write_text(POLICY.replace('extends "default"\n', ""))
    blue_pod = pod("p", labels={"color": "blue"})
    blocked = {"name": "blue is blocked", "pod": blue_pod, "expect": {"feasible": ["small"]}}
    # `default` is the bundled set; other entries are relative to the test file
    path = write_suite(tmp_path / "team", [blocked], rules=["default", "../shared/blue.rules"])
    code, out, _ = run(capsys, path)
    assert (code, out.splitlines()[-1]) == (0, "1 passed, 0 failed")
    # --rules replaces every file's own set: without the policy, blue pods go anywhere
    code, out, _ = run(capsys, path, "--rules", "default")
    assert code == 1
    assert "blue is blocked: feasible: expected [small], got [large, small]" in out


def test_shared_lists_are_spliced_and_cases_replace_file_objects(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "policy.rules").write_text(POLICY)
    text = """
nodes:
  - {metadata: {name: n1}, status: {allocatable: {cpu: "2", memory: 4Gi, pods: "110"}}}
pods: &running
  - {metadata: {name: r1}, spec: {nodeName: n1, containers: [{name: c, resources: {requests: {cpu: "1"}}}]}}
cases:
  - name: one running pod leaves room
    pod: {metadata: {name: p}, spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}}
    expect: {feasible: [n1]}
  - name: a second running pod fills the node
    pod: {metadata: {name: p}, spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}}
    pods:
      - *running
      - {metadata: {name: r2}, spec: {nodeName: n1, containers: [{name: c, resources: {requests: {cpu: "1"}}}]}}
    expect: {unschedulable: true, reasons: {n1: Insufficient cpu}, nominated: null, victims: []}
"""
    path = tmp_path / "splice.test.yaml"
    path.write_text(text)
    code, out, _ = run(capsys, path)
    assert (code, out.strip()) == (0, "2 passed, 0 failed")


def test_preemption_expectations(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    low = {**pod("low", cpu="3"), "metadata": {"name": "low", "namespace": "batch"}}
    low["spec"] = {**low["spec"], "nodeName": "small", "priority": 1}
    high = pod("high", cpu="2")
    high["spec"] = {**high["spec"], "priority": 100}
    case = {
        "name": "evicts",
        "pod": high,
        "nodes": [node("small", cpu="4")],
        "pods": [low],
        "expect": {"unschedulable": True, "nominated": "small", "victims": ["batch/low"]},
    }
    wrong = {**case, "name": "wrong victims", "expect": {"victims": []}}
    path = write_suite(tmp_path, [case, wrong])
    code, out, _ = run(capsys, path)
    assert code == 1
    assert f"FAIL {path}: wrong victims: victims: expected [], got [batch/low]" in out
    assert out.splitlines()[-1] == "1 passed, 1 failed"


@pytest.mark.parametrize("claimed_by", ["resourceClaimName", "resourceClaimTemplateName"])
def test_a_group_case_has_the_files_dra_objects(
    claimed_by: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A group case's cluster holds the file's DeviceClasses, ResourceSlices and ResourceClaims
    as a one-pod case's does, and every member's template claims are made (not the first
    member's alone): members claiming GPUs go to the node that has them. (The group's cluster,
    once built apart from the one-pod case's, left the DRA objects out: no member was placed.)"""
    claim = {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}

    def member(name: str) -> dict[str, Any]:
        spec = pod(name)["spec"]
        source = f"{name}-gpu" if claimed_by == "resourceClaimName" else "one-gpu"
        spec["resourceClaims"] = [{"name": "gpu", claimed_by: source}]
        spec["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
        return {"metadata": {"name": name}, "spec": spec}

    case = {
        "name": "a gang claiming GPUs goes to the GPU node",
        "group": {"metadata": {"name": "train"}, "spec": {"minMember": 2}},
        "members": [member("w0"), member("w1")],
        "expect": {"group": {"placed": True}, "members": {"w0": "gpus", "w1": "gpus"}},
    }
    claims: dict[str, Any] = (
        {"resourceClaims": [{"metadata": {"name": f"{m}-gpu"}, "spec": claim} for m in ("w0", "w1")]}
        if claimed_by == "resourceClaimName"
        else {"resourceClaimTemplates": [{"metadata": {"name": "one-gpu"}, "spec": {"spec": claim}}]}
    )
    suite = {
        "rules": ["default"],
        "nodes": [node("plain"), node("gpus")],
        "deviceClasses": [
            {
                "metadata": {"name": "gpu.example.com"},
                "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]},
            }
        ],
        "resourceSlices": [
            {
                "metadata": {"name": "gpus"},
                "spec": {
                    "driver": "gpu.example.com",
                    "nodeName": "gpus",
                    "pool": {"name": "gpus", "generation": 1, "resourceSliceCount": 1},
                    "devices": [{"name": "gpu-0"}, {"name": "gpu-1"}],
                },
            }
        ],
        **claims,
        "cases": [case],
    }
    path = tmp_path / "gang.test.yaml"
    path.write_text(yaml.safe_dump(suite, sort_keys=False))
    code, out, _ = run(capsys, path)
    assert (code, out.splitlines()[-1]) == (0, "1 passed, 0 failed"), out
