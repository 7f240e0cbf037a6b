"""Overriding part of a rule (`override score X weight 3`), disabling rules, and what lint and the
other commands say about them: parsing, checking, formatting, composition, messages."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rulesched.authoring.ruletest import schedule
from rulesched.authoring.testcase import Case
from rulesched.authoring.testfile import read_case_file
from rulesched.lang import RuleSet, check_texts, load_rules, load_rules_text
from rulesched.lang.frontend import ast
from rulesched.lang.frontend.files import bundled_rules_dir
from rulesched.lang.frontend.format import format_source
from rulesched.lang.frontend.parse import parse_source
from rulesched.lang.frontend.printer import print_file, print_item
from rulesched.lang.frontend.source import Diagnostic, Severity, Source
from rulesched.model import Pod
from rulesched.scheduler.scoring import score_matrix, weighted_totals
from tests.helpers.profiles import examples
from tests.strategies import SPAN, expressions, names, weights

REPO = Path(__file__).resolve().parents[1]
DEFAULT = bundled_rules_dir() / "default.rules"
DEFAULT_TEXT = DEFAULT.read_text(encoding="utf-8")


def defined_at(kind: str, name: str) -> str:
    """Where rules/default.rules defines a rule, as diagnostics write it (path:line:col of its name)."""
    match = re.search(rf"^{kind} ({name})\b", DEFAULT_TEXT, re.MULTILINE)
    assert match is not None, (kind, name)
    line = DEFAULT_TEXT.count("\n", 0, match.start()) + 1
    return f"{DEFAULT}:{line}:{match.start(1) - match.start() + 1}"


def parse(text: str) -> tuple[tuple[ast.Item, ...], list[Diagnostic]]:
    tree, diagnostics = parse_source(Source("t.rules", text))
    return tree.items, diagnostics


def on_default(text: str, name: str = "site.rules") -> RuleSet:
    return load_rules_text({name: 'extends "default"\n' + text})


def diagnostics_of(text: str, name: str = "site.rules") -> list[Diagnostic]:
    """Every diagnostic of `text` composed with the default rules (it says `extends` itself)."""
    return list(check_texts({name: text}).diagnostics)


def rendered(diagnostics: list[Diagnostic], severity: Severity) -> list[str]:
    return [d.render() for d in diagnostics if d.severity is severity]


# --- parsing ----------------------------------------------------------------------------------


def test_a_weight_alone_parses_as_a_partial_override() -> None:
    (item,), problems = parse("override score NodeResourcesFit weight 3\n")
    assert problems == []
    assert isinstance(item, ast.PartialOverride)
    assert (item.kind, item.name, item.guard, item.normalize) == (ast.RuleKind.SCORE, "NodeResourcesFit", None, None)
    assert isinstance(item.weight, ast.Literal) and item.weight.value == 3
    assert (item.name_span.line, item.name_span.column) == (1, 16)
    assert (item.span.start, item.span.end) == (0, len("override score NodeResourcesFit weight 3"))


def test_options_in_any_order_then_a_guard_and_the_next_item() -> None:
    items, problems = parse(
        "override score s normalize max weight 2 when pod.priority > 1\n"
        "override filter f when pod.priority > 0 filter g: true\n"
        'override preempt p when pod.preemption_policy != "Never"\n'
    )
    assert problems == []
    score, flt, rule, preempt = items
    assert isinstance(score, ast.PartialOverride) and (score.normalize, score.weight) == (
        "max",
        ast.Literal(ast.LiteralKind.NUMBER, 2, span=SPAN),
    )
    assert isinstance(score.guard, ast.Binary) and score.guard.op == ">"
    assert isinstance(flt, ast.PartialOverride) and flt.kind is ast.RuleKind.FILTER and flt.weight is None
    assert isinstance(rule, ast.Rule) and rule.name == "g"
    assert isinstance(preempt, ast.PartialOverride) and preempt.kind is ast.RuleKind.PREEMPT
    assert (preempt.span.line, preempt.span.column) == (3, 1)


def test_the_full_override_keeps_its_meaning() -> None:
    (item,), problems = parse("override score s weight 2: 10\n")
    assert problems == []
    assert (
        isinstance(item, ast.Rule) and item.override and item.body == ast.Literal(ast.LiteralKind.NUMBER, 10, span=SPAN)
    )


@pytest.mark.parametrize(
    ("text", "line", "column", "message"),
    [
        (
            "override score X\n",
            1,
            16,
            "override score 'X' changes nothing: state `weight N`, `normalize MODE` or `when GUARD`, "
            "or a whole rule with ': BODY'",
        ),
        (
            "override filter X\n",
            1,
            17,
            "override filter 'X' changes nothing: state `when GUARD` or `unresolvable [when COND]`, or a whole rule with ': BODY'",
        ),
        (
            "override filter X weight 2\n",
            1,
            19,
            "unexpected 'weight'; expected ':', 'unresolvable', 'when', a new item",
        ),
        ("override score s weight 2 +\n", 1, 27, "unexpected '+'"),
        ("override score s when\n", 1, 21, "unexpected end of score 's'; expected "),
        ("score s: 1 +", 1, 12, "unexpected end of score 's'; expected "),
        ("let x = 1 +  # a comment\n", 1, 11, "unexpected end of let 'x'; expected "),
        ('filter f: "score x" + # let y\n', 1, 21, "unexpected end of filter 'f'; expected "),
        ("override", 1, 8, "unexpected end of override; expected 'filter', 'preempt', 'score'"),
        ("disable score", 1, 13, "unexpected end of disable; expected a name"),
    ],
)
def test_syntax_errors(text: str, line: int, column: int, message: str) -> None:
    _, (d,) = parse(text)
    assert (d.code, d.span.line, d.span.column) == ("syntax", line, column), d.render()
    assert d.message.startswith(message), d.message


# --- formatting -------------------------------------------------------------------------------


def test_fmt_prints_partial_overrides_canonically_and_round_trips() -> None:
    text = (
        "# raise it\n"
        "override   score NodeResourcesFit\n   weight 3\n"
        "override score s normalize max weight 2 when pod.priority>1\n"
        "override filter f when not(pod.priority < 0)\n"
        "override preempt p when true\n"
    )
    canonical, why = format_source(Source("t.rules", text))
    assert why == ""
    assert canonical == (
        "# raise it\n"
        "override score NodeResourcesFit weight 3\n\n"
        "override score s weight 2 normalize max when pod.priority > 1\n\n"
        "override filter f when not pod.priority < 0\n\n"
        "override preempt p when true\n"
    )
    assert format_source(Source("t.rules", canonical)) == (canonical, "")
    original, _ = parse(text)
    again, _ = parse(canonical)
    assert again == original


partial_overrides = st.builds(
    lambda kind, name, guard, weight, normalize: ast.PartialOverride(
        kind,
        name,
        guard=guard,
        weight=weight if kind is ast.RuleKind.SCORE else None,
        normalize=normalize if kind is ast.RuleKind.SCORE else None,
        span=SPAN,
        name_span=SPAN,
    ),
    st.sampled_from(list(ast.RuleKind)),
    names,
    st.none() | expressions,
    st.none() | weights,
    st.none() | st.sampled_from(["max", "reverse", "minmax", "spread", "none", "min"]),
).filter(lambda p: p.guard is not None or p.weight is not None or p.normalize is not None)


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(partial_overrides, min_size=1, max_size=4))
def test_print_then_parse_is_the_same_partial_override(items: list[ast.PartialOverride]) -> None:
    tree = ast.RulesFile(SPAN.source, tuple(items))
    text = print_file(tree)
    parsed, problems = parse_source(Source("g.rules", text))
    assert problems == [], (text, [d.render() for d in problems])
    assert parsed.items == tree.items, text
    assert all("\n" not in print_item(item) and ":" not in print_item(item).split(" when ")[0] for item in items)


# --- composition ------------------------------------------------------------------------------


def test_the_overridden_weight_is_the_one_totalled() -> None:
    base = "score a weight 2: 10\nscore b normalize max: pod.priority\nscore c: 1\n"
    rules = load_rules_text({"a.rules": base, "b.rules": "override score a weight 7\noverride score b weight 3\n"})
    assert rules.names == ("a", "b", "c")  # the overridden rules keep their places
    scores = rules.bind(Pod("p", priority=4)).scores
    assert [(s.name, s.weight, s.normalize) for s in scores] == [("a", 7, "none"), ("b", 3, "max"), ("c", 1, "none")]
    assert [s.score(None) for s in scores] == [10, 4, 1]  # the bodies are the base's
    # raw scores of two nodes, then the fixed sum of the scores that are not normalised
    raw = [[10, 4, 1], [10, 2, 1]]
    matrix = score_matrix([[*row, 7 * row[0] + 1 * row[2]] for row in raw])
    per_rule: list = []
    totals = weighted_totals(scores, matrix, per_rule)
    assert [int(t) for t in totals] == [7 * 10 + 3 * 100 + 1, 7 * 10 + 3 * 50 + 1]
    assert [int(v) for v in per_rule[1]] == [100, 50]


def test_normalize_and_guard_overrides_keep_the_rest() -> None:
    rules = on_default(
        "override score ImageLocality normalize max\n"
        "override score NodeResourcesBalancedAllocation when pod.priority > 100\n"
        "override filter PodTopologySpread when true\n"
        "override preempt DefaultPreemption when pod.priority > 5\n"
    )
    default = load_rules([DEFAULT])
    assert rules.names == default.names
    plain = rules.bind(Pod("p", priority=1))
    image = next(s for s in plain.scores if s.name == "ImageLocality")
    assert (image.weight, image.normalize) == (1, "max")
    assert "NodeResourcesBalancedAllocation" not in [s.name for s in plain.scores]
    assert "PodTopologySpread" in [f.name for f in plain.filters]  # no constraints: applies now
    assert "PodTopologySpread" not in [f.name for f in default.bind(Pod("p", priority=1)).filters]
    assert [p.name for p in plain.preempts] == []
    assert [p.name for p in rules.bind(Pod("q", priority=6)).preempts] == ["DefaultPreemption"]
    fit = [(f.name, f.weight, f.normalize) for f in plain.scores if f.name == "NodeResourcesFit"]
    assert fit == [("NodeResourcesFit", 1, "none")]


def test_a_full_override_starts_from_the_defaults() -> None:
    rules = on_default("override score TaintToleration: 0\n")
    (taint,) = [s for s in rules.bind(Pod("p")).scores if s.name == "TaintToleration"]
    assert (taint.weight, taint.normalize, taint.score(None)) == (1, "none", 0)


def test_disabled_rules_are_gone_from_the_rule_set() -> None:
    rules = on_default(
        "disable score ImageLocality\ndisable filter NodePorts\ndisable NodeAffinity\ndisable preempt DefaultPreemption\n"
    )
    default = load_rules([DEFAULT])
    assert [r.checked.name for r in rules.scores] == [
        r.checked.name for r in default.scores if r.checked.name not in ("ImageLocality", "NodeAffinity")
    ]
    assert [r.checked.name for r in rules.filters] == [
        r.checked.name for r in default.filters if r.checked.name not in ("NodePorts", "NodeAffinity")
    ]
    assert "DefaultPreemption" not in rules.names
    assert rules.bind(Pod("p", priority=10)).preempts == ()


SCENARIO = """
rules: [default]
nodes:
  - {metadata: {name: node-a}, status: {allocatable: {cpu: "16", memory: 64Gi, pods: "110"}}}
  - {metadata: {name: node-b}, status: {allocatable: {cpu: "16", memory: 64Gi, pods: "110"}}}
cases:
  - name: one
    pod:
      metadata: {name: new-pod, namespace: apps}
      spec: {containers: [{name: app, image: nginx, resources: {requests: {cpu: 100m, memory: 128Mi}}}]}
    pods:
      - {metadata: {name: a1}, spec: {nodeName: node-a, containers: [{name: c, resources: {requests: {cpu: "4"}}}]}}
    expect: {feasible: [node-a, node-b]}
"""


def scenario(tmp_path: Path) -> Case:
    path = tmp_path / "s.test.yaml"
    path.write_text(SCENARIO, encoding="utf-8")
    (case,) = read_case_file(path).cases
    return case


def test_a_scheduling_cycle_totals_with_the_overridden_weight(tmp_path: Path) -> None:
    case = scenario(tmp_path)
    before = schedule(load_rules([DEFAULT]), case).scores
    after = schedule(on_default("override score NodeResourcesFit weight 3\n"), case).scores
    for node in ("node-a", "node-b"):
        assert after[node]["NodeResourcesFit"] == before[node]["NodeResourcesFit"]
        assert after[node]["total"] == before[node]["total"] + 2 * before[node]["NodeResourcesFit"]


# --- errors and notes -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            "override score NodeResourcesFitt weight 2",
            "site.rules:2:16: error: cannot override score 'NodeResourcesFitt': no such score [unknown-rule]\n"
            "    override score NodeResourcesFitt weight 2\n"
            "                   ^^^^^^^^^^^^^^^^^\n"
            "    help: did you mean `NodeResourcesFit`?",
        ),
        (
            "disable score ImageLocalty",
            "site.rules:2:15: error: cannot disable score 'ImageLocalty': no such score [unknown-rule]\n"
            "    disable score ImageLocalty\n"
            "                  ^^^^^^^^^^^^\n"
            "    help: did you mean `ImageLocality`?",
        ),
        (
            "disable score imagelocality",
            "site.rules:2:15: error: cannot disable score 'imagelocality': no such score [unknown-rule]\n"
            "    disable score imagelocality\n"
            "                  ^^^^^^^^^^^^^\n"
            "    help: did you mean `ImageLocality`?",
        ),
        (
            "disable score NodeUnschedulable",
            "site.rules:2:15: error: cannot disable score 'NodeUnschedulable': no such score "
            "('NodeUnschedulable' is a filter) [unknown-rule]\n"
            "    disable score NodeUnschedulable\n"
            "                  ^^^^^^^^^^^^^^^^^\n"
            "    help: write `disable filter NodeUnschedulable`",
        ),
        (
            "disable NodeAfinity",
            "site.rules:2:9: error: cannot disable rule 'NodeAfinity': no such rule [unknown-rule]\n"
            "    disable NodeAfinity\n"
            "            ^^^^^^^^^^^\n"
            "    help: did you mean `NodeAffinity`?",
        ),
        (
            "override filter ImageLocality when true",
            "site.rules:2:17: error: there is no filter 'ImageLocality' to override ('ImageLocality' is a score) "
            "[override-kind]\n"
            "    override filter ImageLocality when true\n"
            "                    ^^^^^^^^^^^^^\n"
            "    help: write `override score ImageLocality`",
        ),
        (
            "override score ImageLocality weight 0",
            "site.rules:2:37: error: weight must be a positive whole number, not 0 [weight]\n"
            "    override score ImageLocality weight 0\n"
            "                                        ^",
        ),
        (
            "override score ImageLocality normalize maxx",
            "site.rules:2:16: error: unknown normalization 'maxx' [normalize]\n"
            "    override score ImageLocality normalize maxx\n"
            "                   ^^^^^^^^^^^^^\n"
            "    help: did you mean `max`?",
        ),
        (
            'override filter NodeName when node.name == "a"',
            "site.rules:2:31: error: 'node' cannot be used in a when guard [scope]\n"
            '    override filter NodeName when node.name == "a"\n'
            "                                  ^^^^",
        ),
    ],
)
def test_errors_are_located_in_the_overriding_file(line: str, expected: str) -> None:
    found = diagnostics_of(f'extends "default"\n{line}\n')
    assert rendered(found, Severity.ERROR) == [expected]


def test_notes_name_the_rule_changed_at_its_own_location() -> None:
    found = diagnostics_of(
        'extends "default"\n'
        "override score NodeResourcesFit weight 3\n"
        "override score ImageLocality normalize max when pod.priority > 0\n"
        "override filter PodTopologySpread when true\n"
        "disable score InterPodAffinity\n"
        "override filter NodeName:\n    true\n"
        "disable NodeAffinity\n"
    )
    assert [(d.code, d.location, d.message) for d in found] == [
        (
            "override",
            "site.rules:2:16",
            f"overrides score 'NodeResourcesFit' defined at {defined_at('score', 'NodeResourcesFit')}: weight 1 -> 3",
        ),
        (
            "override",
            "site.rules:3:16",
            f"overrides score 'ImageLocality' defined at {defined_at('score', 'ImageLocality')}: "
            "normalize none -> max, when guard added",
        ),
        (
            "override",
            "site.rules:4:17",
            f"overrides filter 'PodTopologySpread' defined at {defined_at('filter', 'PodTopologySpread')}: "
            "when guard replaced",
        ),
        (
            "disable",
            "site.rules:5:15",
            f"disables score 'InterPodAffinity' defined at {defined_at('score', 'InterPodAffinity')}",
        ),
        ("override", "site.rules:6:17", f"overrides filter 'NodeName' defined at {defined_at('filter', 'NodeName')}"),
        (
            "disable",
            "site.rules:8:9",
            f"disables filter 'NodeAffinity' defined at {defined_at('filter', 'NodeAffinity')}",
        ),
        (
            "disable",
            "site.rules:8:9",
            f"disables score 'NodeAffinity' defined at {defined_at('score', 'NodeAffinity')}",
        ),
    ]
    assert {d.severity for d in found} == {Severity.NOTE}


def test_a_second_override_points_at_the_first() -> None:
    found = diagnostics_of(
        'extends "default"\noverride score ImageLocality weight 2\noverride score ImageLocality weight 4\n'
    )
    assert [d.message for d in found][1] == "overrides score 'ImageLocality' defined at site.rules:2:16: weight 2 -> 4"


def test_notes_about_a_base_stay_with_the_base(tmp_path: Path) -> None:
    (tmp_path / "base.rules").write_text('extends "default"\ndisable score ImageLocality\n', encoding="utf-8")
    site = tmp_path / "site.rules"
    site.write_text('extends "base.rules"\nscore s weight 2: 1\n', encoding="utf-8")
    assert lint(site).stdout == "1 file, 1 rule (extends 23): 0 errors, 0 warnings\n"  # a disable is no rule


# --- the weak-score warning -------------------------------------------------------------------


def test_a_score_under_five_percent_of_the_set_is_a_warning() -> None:
    text = 'extends "default"\noverride score TaintToleration weight 20\nscore tiny weight 1: 100 - len(node.pods)\n'
    assert rendered(diagnostics_of(text), Severity.WARNING) == [
        "site.rules:3:19: warning: score 'tiny' can add at most 100 to a node's total (weight 1), under 5% of the "
        "2,700 the set's scores can add; it can only break near-ties [weak-score]\n"
        "    score tiny weight 1: 100 - len(node.pods)\n"
        "                      ^\n"
        "    help: give it weight 2 or more for it to count"
    ]
    assert rendered(diagnostics_of(text.replace("weight 1:", "weight 2:")), Severity.WARNING) == []


def test_guarded_scores_are_not_counted_against_others() -> None:
    # 19 x 1 < 20 only if the guarded score counted
    text = "score big weight 20 when pod.priority > 0: 1\nscore small: 1\n"
    assert rendered(diagnostics_of(text), Severity.WARNING) == []
    unguarded = rendered(diagnostics_of(text.replace(" when pod.priority > 0", "")), Severity.WARNING)
    assert [line.splitlines()[0] for line in unguarded] == [
        "site.rules:2:7: warning: score 'small' can add at most 100 to a node's total (weight 1), under 5% of the "
        "2,100 the set's scores can add; it can only break near-ties [weak-score]"
    ]


def test_no_bundled_rule_set_is_weak() -> None:
    # each bundled file is a set of its own (not the folder: it holds alternatives to each other)
    run = lint("--strict", *sorted((REPO / "rules").glob("*.rules")), REPO / "rules" / "examples", REPO / "deploy")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "weak-score" not in run.stdout


# --- rulesched lint and the other commands ---------------------------------------------------


def lint(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rulesched", "lint", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )


def test_lint_counts_the_files_own_rules(tmp_path: Path) -> None:
    path = tmp_path / "a.rules"
    path.write_text(
        'extends "default"\n\nscore pod_capacity weight 5:\n    100 - 100 * len(node.pods) / node.allocatable.pods\n',
        encoding="utf-8",
    )
    run = lint(path)
    assert (run.returncode, run.stdout) == (0, "1 file, 1 rule (extends 23): 0 errors, 0 warnings\n")
    report = json.loads(lint("--format", "json", path).stdout)
    assert (report["rules"], report["extended_rules"], report["notes"]) == (1, 23, 0)
    assert lint(DEFAULT).stdout == "1 file, 23 rules: 0 errors, 0 warnings\n"


def test_lint_prints_notes_and_strict_ignores_them(tmp_path: Path) -> None:
    path = tmp_path / "site.rules"
    path.write_text(
        'extends "default"\noverride score NodeResourcesBalancedAllocation weight 2\ndisable score ImageLocality\n',
        encoding="utf-8",
    )
    run = lint("--strict", path)
    assert run.returncode == 0, run.stdout
    balanced = defined_at("score", "NodeResourcesBalancedAllocation")
    assert run.stdout == (
        f"{path}:2:16: note: overrides score 'NodeResourcesBalancedAllocation' defined at {balanced}: "
        "weight 1 -> 2 [override]\n"
        "    override score NodeResourcesBalancedAllocation weight 2\n"
        "                   ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
        f"{path}:3:15: note: disables score 'ImageLocality' defined at {defined_at('score', 'ImageLocality')} [disable]\n"
        "    disable score ImageLocality\n"
        "                  ^^^^^^^^^^^^^\n"
        "1 file, 1 rule (extends 23): 0 errors, 0 warnings, 2 notes\n"
    )


BAD = 'extends "default"\nscore s: node.free.cpus\noverride score NodeResourcesFitt weight 2\ndisable score ImageLocality\n'


@pytest.mark.parametrize(
    "command",
    [
        ["simulate", "--rules", "{rules}", "examples/cluster.yaml"],
        ["test", "--rules", "{rules}", "rules/examples/pod-capacity"],
        ["diff", "--new", "{rules}", "examples/cluster.yaml"],
    ],
)
def test_commands_print_the_diagnostics_lint_prints(tmp_path: Path, command: list[str]) -> None:
    path = tmp_path / "bad.rules"
    path.write_text(BAD, encoding="utf-8")
    run = subprocess.run(
        [sys.executable, "-m", "rulesched", *(part.format(rules=path) for part in command)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert run.returncode == 2, run.stderr
    assert run.stdout == ""
    assert run.stderr == (
        f"{path}:2:10: error: 'cpus' is not a resource name; write node.free[\"cpus\"] for other resources "
        "[unknown-field]\n"
        "    score s: node.free.cpus\n"
        "             ^^^^^^^^^^^^^^\n"
        "    help: did you mean `node.free.cpu`?\n"
        f"{path}:3:16: error: cannot override score 'NodeResourcesFitt': no such score [unknown-rule]\n"
        "    override score NodeResourcesFitt weight 2\n"
        "                   ^^^^^^^^^^^^^^^^^\n"
        "    help: did you mean `NodeResourcesFit`?\n"
        f"rulesched: {path}:2:10: 'cpus' is not a resource name; write node.free[\"cpus\"] for other resources "
        "(and 1 more)\n"
    )


def test_errors_without_diagnostics_stay_one_line(tmp_path: Path) -> None:
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "rulesched",
            "simulate",
            "--rules",
            str(tmp_path / "absent.rules"),
            "examples/cluster.yaml",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert (run.returncode, run.stderr) == (2, f"rulesched: {tmp_path / 'absent.rules'}: no such file or folder\n")
