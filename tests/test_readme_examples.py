"""The rules shown in README.md (and docs/language.md) are real: each compiles, composed with the
bundled default rules unless it says what it extends, without errors or warnings; the README's,
whole files, pass `rulesched lint` as they are (so they say `extends "default"`: no
`no-resource-fit`), and are in `rulesched fmt`'s form; and the README's
"prefer nodes running fewer pods" example, composed with the default profile, decides a placement
the default profile alone decides the other way, by a clear margin."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rulesched.authoring.ruletest import Outcome, schedule
from rulesched.authoring.testcase import Case
from rulesched.authoring.testfile import read_case_file
from rulesched.lang import RuleSet, check_texts, load_rules, load_rules_text
from rulesched.lang.frontend.files import bundled_rules_dir
from rulesched.lang.frontend.format import format_source
from rulesched.lang.frontend.lint import LintSettings, lint
from rulesched.lang.frontend.source import Severity, Source

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^```([\w-]*)[^\n]*\n(.*?)^```", re.DOTALL | re.MULTILINE)
RULE_LINE = re.compile(r"^(?:audit )?(?:override |disable )?(?:filter|score|preempt) \w+", re.MULTILINE)


def rules_blocks(doc: str, languages: tuple[str, ...]) -> list[tuple[str, str]]:
    """(``doc:line``, text) of each fenced block in one of ``languages`` that holds a rule at the
    start of a line; console transcripts (a line starting with ``$``) are not rules."""
    text = (ROOT / doc).read_text(encoding="utf-8")
    found = []
    for match in FENCE.finditer(text):
        language, body = match.group(1), match.group(2)
        if language not in languages or not RULE_LINE.search(body):
            continue
        if any(line.startswith("$") for line in body.splitlines()):
            continue
        found.append((f"{doc}:{text.count(chr(10), 0, match.start()) + 1}", body))
    return found


README_BLOCKS = rules_blocks("README.md", ("", "rules"))
DOCS_BLOCKS = rules_blocks("docs/language.md", ("rules",))


def composed(text: str) -> dict[str, str]:
    """The block as a rules file, on top of the default rules unless it names its own base."""
    if re.search(r"^extends ", text, re.MULTILINE):
        return {"example.rules": text}
    return {"example.rules": 'extends "default"\n\n' + text}


def test_the_readme_shows_rules() -> None:
    assert len(README_BLOCKS) >= 1
    assert any("score pod_capacity" in text for _, text in README_BLOCKS)


@pytest.mark.parametrize(
    ("where", "text"), README_BLOCKS + DOCS_BLOCKS, ids=[w for w, _ in README_BLOCKS + DOCS_BLOCKS]
)
def test_each_rules_block_compiles_cleanly(where: str, text: str) -> None:
    loaded = check_texts(composed(text))
    problems = [d.render() for d in loaded.diagnostics if d.severity is not Severity.NOTE]
    assert problems == [], where
    load_rules_text(composed(text))  # and compiles


@pytest.mark.parametrize(("where", "text"), README_BLOCKS, ids=[w for w, _ in README_BLOCKS])
def test_each_readme_rules_block_passes_lint_as_it_is(where: str, text: str, tmp_path: Path) -> None:
    path = tmp_path / "example.rules"
    path.write_text(text, encoding="utf-8")
    result = lint(LintSettings((str(path),)))
    assert [d.render() for d in result.diagnostics if d.severity is not Severity.NOTE] == [], where
    assert format_source(Source("example.rules", text)) == (text, ""), where


# --- the README's "prefer nodes running fewer pods" wins ----------------------------------------

# Two equal nodes: node-a runs 5 pods requesting 500m cpu and 1Gi each, node-b 15 pods of 50m and
# 64Mi. node-b has more free cpu and memory, so the default profile's resource scores prefer it;
# node-a runs fewer pods, which is what the README's score prefers.
CLUSTER = """
rules: [default]
nodes:
  - {metadata: {name: node-a}, status: {allocatable: {cpu: "16", memory: 64Gi, pods: "110"}}}
  - {metadata: {name: node-b}, status: {allocatable: {cpu: "16", memory: 64Gi, pods: "110"}}}
cases:
  - name: fewer but bigger pods, or more smaller ones
    pod:
      metadata: {name: new-pod, namespace: apps}
      spec: {containers: [{name: app, image: nginx, resources: {requests: {cpu: 100m, memory: 128Mi}}}]}
    pods:
{pods}
    expect: {feasible: [node-a, node-b]}
"""


def pod_line(name: str, node: str, cpu: str, memory: str) -> str:
    resources = f"{{requests: {{cpu: {cpu}, memory: {memory}}}}}"
    return (
        f"      - {{metadata: {{name: {name}}}, "
        f"spec: {{nodeName: {node}, containers: [{{name: c, image: busybox, resources: {resources}}}]}}}}"
    )


@pytest.fixture
def case(tmp_path: Path) -> Case:
    pods = [pod_line(f"a{i}", "node-a", "500m", "1Gi") for i in range(5)]
    pods += [pod_line(f"b{i}", "node-b", "50m", "64Mi") for i in range(15)]
    path = tmp_path / "fewer-pods.test.yaml"
    path.write_text(CLUSTER.replace("{pods}", "\n".join(pods)), encoding="utf-8")
    (only,) = read_case_file(path).cases
    return only


def readme_example() -> str:
    (text,) = [text for _, text in README_BLOCKS if "score pod_capacity" in text]
    return text


def totals(outcome: Outcome) -> dict[str, int]:
    return {node: scores["total"] for node, scores in outcome.scores.items()}


def test_the_readme_example_changes_the_placement_clearly(case: Case) -> None:
    default = schedule(load_rules([bundled_rules_dir() / "default.rules"]), case)
    assert (default.best, totals(default)) == (("node-b",), {"node-a": 461, "node-b": 471})

    rules: RuleSet = load_rules_text(composed(readme_example()))
    weight = next(s.weight for s in rules.bind(case.pod).scores if s.name == "pod_capacity")
    outcome = schedule(rules, case)
    assert outcome.best == ("node-a",)
    assert {n: s["pod_capacity"] for n, s in outcome.scores.items()} == {"node-a": 95, "node-b": 86}
    assert totals(outcome) == {"node-a": 461 + 95 * weight, "node-b": 471 + 86 * weight}
    # clearly: the rule's pull towards node-a is more than twice the default profile's the other way
    pull, against = weight * (95 - 86), 471 - 461
    assert pull > 2 * against


def test_at_weight_one_the_example_was_outvoted(case: Case) -> None:
    text = re.sub(r"score pod_capacity weight \d+:", "score pod_capacity weight 1:", readme_example())
    outcome = schedule(load_rules_text(composed(text)), case)
    assert (outcome.best, totals(outcome)) == (("node-b",), {"node-a": 556, "node-b": 557})


def test_the_run_synopsis_names_every_flag_and_the_defaults_it_shows() -> None:
    """README's ``rulesched run [...]`` block against the parser and the settings (issue 34,
    item 14: it lacked --percentage-of-nodes-to-score, and the README named the Lease
    rulesched/rulesched where the default is kube-system/rulesched)."""
    import argparse

    from rulesched.cli import _parser
    from rulesched.run.settings import RunSettings

    readme = (ROOT / "README.md").read_text()
    synopsis = re.search(r"^rulesched run \[.*?(?=^```)", readme, re.DOTALL | re.MULTILINE)
    assert synopsis is not None
    text = synopsis.group(0)
    run = _parser().commands["run"]
    for action in run._actions:
        flags = [o for o in action.option_strings if o.startswith("--") and o not in ("--help",)]
        if not flags or action.dest.endswith("_sub"):  # (the logging flags: shown as -v, --v=N, --log-format)
            continue
        names = [f"[{f}" for f in flags] + [f"[{f.replace('--', '--[no-]', 1)}" for f in flags]
        if isinstance(action, argparse.BooleanOptionalAction):
            names.append(f"[--[no-]{flags[0][2:]}")
        assert any(name in text for name in names), f"{flags[0]} is missing from README's run synopsis"
    defaults = RunSettings()
    lease = f"{defaults.leader_elect_resource_namespace}/{defaults.leader_elect_resource_name}"
    assert f"[--leader-elect-resource-namespace {defaults.leader_elect_resource_namespace}]" in text
    assert f"[--leader-elect-resource-name {defaults.leader_elect_resource_name}]" in text
    assert f"`{lease}` unless" in readme
