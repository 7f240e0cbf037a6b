"""``rulesched test``: rule unit tests in YAML files next to the rules, run like ``opa test``.

::

    rulesched test PATH... [--output text|json] [--rules PATH]...

PATH is a test file or a folder (every ``*.test.yaml`` in it, recursively, hidden folders such as
``.git`` left out). The format of a test file is described in :mod:`rulesched.authoring.testfile`.
Each file is tested against its own rule set (its ``rules:``, else the ``.rules`` files in its
folder); ``--rules`` (repeatable, composed in order, ``default`` the bundled set) tests every file
against the given set instead.

Each case runs one scheduling cycle of the scheduler itself, with ``explain`` on and every node
looked at (:class:`rulesched.scheduler.cycle.Cycle`, then
:func:`rulesched.scheduler.preemption.preempt` when no node fits, as the scheduler does), on a
cluster store built from the case's objects, with a fresh session of the rule set: cases never
see each other. ``status.nominatedNodeName`` of the pod under test is ignored, so every node is
filtered and scored. A pod under test with ``metadata.deletionTimestamp`` is not attempted, as
kube-scheduler skips it: no node passes or fails a filter, and the message is kube-scheduler's
``skip schedule deleting pod: NAMESPACE/NAME`` (``unschedulable: true`` and that ``message`` pass).

Ties: the scheduler breaks ties between equally scored nodes with a seeded random draw, so which
of them it picks says nothing about the rules. A test therefore never depends on the draw:
``winner: NODE`` passes only when NODE alone has the highest total, and a tie is reported as such
(``got a tie between [a, b]``); a test that means the tie says ``winner: [a, b]``.

Text output is one line per failing case, ``FAIL file: case: what differed (expected ..., got
...)``, one ``ERROR file: ...`` line per file that could not be run (malformed, or rules that do
not load; the other files still run), then ``N passed, M failed[, K errors]``. ``--output json``
prints every case (``file``, ``name``, ``passed``, ``failures``, and ``got``: what the cycle
produced), the ``errors`` and the ``summary``. Exit status: 0 when every case passes, 1 when some
case fails, 2 on any error.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from rulesched.authoring.gangcase import compare_group, run_group
from rulesched.authoring.testcase import Case, CaseFile, Expect
from rulesched.authoring.testfile import read_case_file
from rulesched.errors import ConfigError, RuleschedError, RulesError
from rulesched.lang import RuleSet, Session, load_rules, resolve_rules_path
from rulesched.scheduler.cycle import Cycle
from rulesched.scheduler.framework import Code, Preemption, SchedulerSettings, skip_deleting
from rulesched.scheduler.preemption import preempt

TEST_SUFFIXES = (".test.yaml", ".test.yml")
_SHOWN_TOTALS = 5  # nodes whose totals a failed winner shows


def add_test_parser(sub: Any) -> None:
    test = sub.add_parser(
        "test",
        help="run rule unit tests (YAML files next to the rules)",
        description="Run rule unit tests: *.test.yaml files of cases (a pod, nodes, what should happen).",
    )
    test.add_argument("paths", nargs="+", metavar="PATH", help="test files or folders (searched recursively)")
    test.add_argument("--output", choices=("text", "json"), default="text")
    test.add_argument(
        "--rules",
        action="append",
        metavar="PATH",
        help="test every file against this rule set instead of its own (repeatable; 'default': the bundled set)",
    )


@dataclass(frozen=True)
class RuleTestSettings:
    paths: tuple[str, ...]
    output: str = "text"
    rules: tuple[str, ...] = ()  # empty: each file's own rule set


@dataclass(frozen=True)
class Outcome:
    """What one cycle did with a case's pod."""

    feasible: tuple[str, ...]  # in node order
    filtered: Mapping[str, tuple[str, ...]]  # node -> its first failing filter's reasons
    unresolvable: frozenset[str]  # the filtered nodes whose failure preemption cannot fix
    scores: Mapping[str, Mapping[str, int]]  # node -> rule -> normalised score, and "total"
    best: tuple[str, ...]  # the nodes with the highest total (one: the winner)
    message: str
    preemption: Preemption | None  # when no node fits
    members: Mapping[str, str] | None = None  # a group case: member -> its node ("": not bound)
    group_placed: bool | None = None

    def as_json(self) -> dict[str, Any]:
        preemption = self.preemption
        return {
            "feasible": list(self.feasible),
            "winner": self.best[0] if len(self.best) == 1 else list(self.best) or None,
            "filtered": {node: list(reasons) for node, reasons in self.filtered.items()},
            "unresolvable": sorted(self.unresolvable),
            "scores": {node: dict(scores) for node, scores in self.scores.items()},
            "message": self.message,
            "nominated": preemption.nominated if preemption else None,
            "victims": [v.key for v in preemption.victims] if preemption else [],
            **(
                {"group": {"placed": self.group_placed}, "members": dict(self.members)}
                if self.members is not None
                else {}
            ),
        }


@dataclass(frozen=True)
class CaseResult:
    name: str
    failures: tuple[str, ...]
    outcome: Outcome

    @property
    def passed(self) -> bool:
        return not self.failures


@dataclass(frozen=True)
class FileResult:
    """One test file: its cases' results, or the error that kept it from running."""

    path: str
    cases: tuple[CaseResult, ...] = ()
    error: str | None = None


@dataclass(frozen=True)
class RuleTestReport:
    files: tuple[FileResult, ...]

    @property
    def passed(self) -> int:
        return sum(c.passed for f in self.files for c in f.cases)

    @property
    def failed(self) -> int:
        return sum(not c.passed for f in self.files for c in f.cases)

    @property
    def errors(self) -> int:
        return sum(f.error is not None for f in self.files)

    @property
    def exit_code(self) -> int:
        return 2 if self.errors else 1 if self.failed else 0


def test_command(args: argparse.Namespace) -> int:
    settings = RuleTestSettings(tuple(args.paths), args.output, tuple(args.rules or ()))
    report = run_tests(settings)
    print(render_json(report) if settings.output == "json" else render_text(report))
    return report.exit_code


# --- running -------------------------------------------------------------------------------------------


def find_test_files(paths: Iterable[str]) -> list[Path]:
    """The test files under ``paths`` in order, each once; a missing path or a folder without
    tests is a :class:`ConfigError`."""
    found: dict[Path, None] = {}
    for given in paths:
        path = Path(given)
        if path.is_dir():
            files = _tests_under(path)
            if not files:
                raise ConfigError(f"{path}: no *.test.yaml files in this folder")
            found.update(dict.fromkeys(files))
        elif path.is_file():
            found[path] = None
        else:
            raise ConfigError(f"{path}: no such file or folder")
    return list(found)


def _tests_under(folder: Path) -> list[Path]:
    """The test files in ``folder`` and its sub-folders, but not in hidden ones (``.git``, ``.venv``)."""
    found: list[Path] = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found.extend(Path(root, name) for name in files if name.endswith(TEST_SUFFIXES))
    return sorted(found)


def run_tests(settings: RuleTestSettings) -> RuleTestReport:
    files = find_test_files(settings.paths)
    override = load_rules([resolve_rules_path(r) for r in settings.rules]) if settings.rules else None
    loaded: dict[tuple[Path, ...], RuleSet] = {}  # rule sets by their paths, for this run
    results = []
    for path in files:
        try:
            case_file = read_case_file(path)
            rules = override or _rule_set(case_file, loaded)
            results.append(FileResult(str(path), tuple(run_case(rules, case) for case in case_file.cases)))
        except RuleschedError as err:
            message = str(err) if str(err).startswith(str(path)) else f"{path}: {err}"
            results.append(FileResult(str(path), error=message))
    return RuleTestReport(tuple(results))


def _rule_set(case_file: CaseFile, loaded: dict[tuple[Path, ...], RuleSet]) -> RuleSet:
    key = tuple(p.resolve() for p in case_file.rules)
    rules = loaded.get(key)
    if rules is None:
        try:
            rules = loaded[key] = load_rules(case_file.rules)
        except RulesError as err:
            raise RulesError(f"{case_file.path}: rules: {err}", err.diagnostics) from None
    return rules


def run_case(rules: RuleSet, case: Case) -> CaseResult:
    if case.group is not None:  # a group case: its members placed all or nothing
        nodes, placed, message = run_group(rules, case)
        empty: Mapping[str, Any] = MappingProxyType({})
        outcome = Outcome((), empty, frozenset(), empty, (), message, None, members=nodes, group_placed=placed)
        return CaseResult(case.name, tuple(compare_group(case.expect, nodes, placed, message)), outcome)
    outcome = schedule(rules, case)
    failures = compare(case.expect, outcome)
    if failures and case.pod.deleting:  # say why nothing was filtered or scored
        failures.append("the pod has metadata.deletionTimestamp: kube-scheduler skips a pod being deleted")
    return CaseResult(case.name, tuple(failures), outcome)


def schedule(rules: RuleSet, case: Case) -> Outcome:
    """One cycle of the scheduler for the case's pod, explained, then preemption if no node fits."""
    store = case.cluster.store()
    pod = dataclasses.replace(case.pod, nominated_node_name="") if case.pod.nominated_node_name else case.pod
    if pod.deleting:  # kube-scheduler never attempts a pod being deleted (skipPodSchedule)
        return Outcome((), MappingProxyType({}), frozenset(), MappingProxyType({}), (), skip_deleting(pod), None)
    session = Session(rules)
    snapshot = store.snapshot()
    settings = SchedulerSettings(percentage_of_nodes_to_score=100, explain=True)
    result, bound = Cycle(settings).run(pod, snapshot, session)
    try:
        if result.code is not Code.SCHEDULED:
            result.preemption = preempt(snapshot, session, pod)
    finally:
        bound.release()
    filtered = MappingProxyType(dict(result.filtered or {}))
    scores = MappingProxyType({node: MappingProxyType(entry) for node, entry in (result.scores or {}).items()})
    feasible = tuple(n.name for n in case.cluster.nodes if n.name not in filtered)
    top = max((entry["total"] for entry in scores.values()), default=None)
    best = tuple(name for name in feasible if name in scores and scores[name]["total"] == top)
    unresolvable = frozenset(result.unresolvable or ())
    return Outcome(feasible, filtered, unresolvable, scores, best, result.message, result.preemption)


# --- comparing ---------------------------------------------------------------------------------------


def compare(expect: Expect, got: Outcome) -> list[str]:
    """What differs between the expectations and the outcome, one phrase each."""
    failures: list[str] = []
    feasible = set(got.feasible)
    if expect.feasible is not None and feasible != expect.feasible:
        failed = [f"{n} failed: {'; '.join(got.filtered.get(n, ()))}" for n in sorted(expect.feasible - feasible)]
        why = f" ({', '.join(failed)})" if failed else ""
        failures.append(f"feasible: expected {_names(expect.feasible)}, got {_names(feasible)}{why}")
    if expect.unschedulable is not None and expect.unschedulable != (not feasible):
        if expect.unschedulable:
            failures.append(f"unschedulable: expected true, got feasible nodes {_names(feasible)}")
        else:
            failures.append(f"unschedulable: expected false, got {got.message!r}")
    if expect.winner is not None and set(got.best) != expect.winner:
        failures.append(f"winner: expected {_winner(expect.winner)}, got {_got_winner(got)}")
    for node, reasons in (expect.reasons or {}).items():
        actual = got.filtered.get(node, ())
        if actual != reasons:
            failures.append(f"reasons.{node}: expected {_reasons(reasons)}, got {_reasons(actual)}")
    if expect.unresolvable is not None and got.unresolvable != expect.unresolvable:
        failures.append(f"unresolvable: expected {_names(expect.unresolvable)}, got {_names(got.unresolvable)}")
    for node, rules in (expect.scores or {}).items():
        failures.extend(_compare_scores(node, rules, got))
    if expect.message is not None and got.message != expect.message:
        failures.append(f"message: expected {expect.message!r}, got {got.message!r}")
    failures.extend(_compare_preemption(expect, got))
    return failures


def _compare_scores(node: str, rules: Mapping[str, int | None], got: Outcome) -> list[str]:
    entry = got.scores.get(node)
    if entry is None:
        why = f"it failed a filter: {'; '.join(got.filtered[node])}" if node in got.filtered else "no node fits"
        return [f"scores.{node}: not scored ({why})"]
    failures = []
    for rule, want in rules.items():
        actual = entry.get(rule)
        if want is None and actual is not None:
            failures.append(f"scores.{node}.{rule}: expected the rule not to apply, got {actual}")
        elif want is not None and actual is None:
            applied = ", ".join(r for r in entry if r != "total") or "none"
            failures.append(f"scores.{node}.{rule}: expected {want}, got no such score (applied: {applied})")
        elif actual != want:
            failures.append(f"scores.{node}.{rule}: expected {want}, got {actual}")
    return failures


def _compare_preemption(expect: Expect, got: Outcome) -> list[str]:
    failures = []
    preemption = got.preemption
    fits = " (the pod fits without preemption)" if preemption is None else ""
    if expect.nominated is not None:
        nominated = preemption.nominated if preemption else None
        if (nominated or "") != expect.nominated:
            failures.append(f"nominated: expected {expect.nominated or 'none'}, got {nominated or 'none'}{fits}")
    if expect.victims is not None:
        victims = {v.key for v in preemption.victims} if preemption else set()
        if victims != expect.victims:
            failures.append(f"victims: expected {_names(expect.victims)}, got {_names(victims)}{fits}")
    return failures


def _names(names: Iterable[str]) -> str:
    return "[" + ", ".join(sorted(names)) + "]"


def _reasons(reasons: Sequence[str]) -> str:
    return json.dumps(list(reasons)) if reasons else "none (passes every filter)"


def _winner(names: Iterable[str]) -> str:
    names = sorted(names)
    return names[0] if len(names) == 1 else f"a tie between {_names(names)}"


def _got_winner(got: Outcome) -> str:
    if not got.best:
        return f"no node ({got.message})"
    ranked = sorted(got.scores.items(), key=lambda item: (-item[1]["total"], item[0]))[:_SHOWN_TOTALS]
    totals = ", ".join(f"{node} {entry['total']}" for node, entry in ranked)
    if len(got.best) == 1:
        return f"{got.best[0]} (totals: {totals})"
    return (
        f"a tie between {_names(got.best)} (totals: {totals}; the scheduler draws one at random, "
        f"write winner: {_names(got.best)} to expect the tie)"
    )


# --- output ----------------------------------------------------------------------------------------------


def render_text(report: RuleTestReport) -> str:
    lines = []
    for file in report.files:
        if file.error is not None:
            lines.append(f"ERROR {file.error}")
        for case in file.cases:
            if not case.passed:
                lines.append(f"FAIL {file.path}: {case.name}: {'; '.join(case.failures)}")
    summary = f"{report.passed} passed, {report.failed} failed"
    if report.errors:
        summary += f", {report.errors} error{'s' if report.errors > 1 else ''}"
    lines.append(summary)
    return "\n".join(lines)


def render_json(report: RuleTestReport) -> str:
    document = {
        "cases": [
            {
                "file": file.path,
                "name": case.name,
                "passed": case.passed,
                "failures": list(case.failures),
                "got": case.outcome.as_json(),
            }
            for file in report.files
            for case in file.cases
        ],
        "errors": [{"file": file.path, "error": file.error} for file in report.files if file.error is not None],
        "summary": {"passed": report.passed, "failed": report.failed, "errors": report.errors},
    }
    return json.dumps(document, indent=2)
