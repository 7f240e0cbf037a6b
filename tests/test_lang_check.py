"""The checker's diagnostics, rule-set composition, and `rulesched lint` on good and bad input."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rulesched.errors import RulesError
from rulesched.lang import check_paths, load_rules
from rulesched.lang.frontend.check import check
from rulesched.lang.frontend.parse import MAX_LINE_CHARS, parse_source
from rulesched.lang.frontend.source import Severity, Source
from rulesched.model import Pod

REPO = Path(__file__).resolve().parents[1]


def diagnostics(text: str) -> list:
    tree, problems = parse_source(Source("t.rules", text))
    return [*problems, *check([tree]).diagnostics]


def located(text: str) -> list[tuple[str, int, int]]:
    return [(d.code, d.span.line, d.span.column) for d in diagnostics(text)]


# --- diagnostics ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "code", "line", "column", "message", "suggestion"),
    [
        (
            "filter f:\n    node.allocatible.cpu > 1",
            "unknown-field",
            2,
            5,
            "node has no field 'allocatible'",
            "did you mean `node.allocatable`?",
        ),
        (
            "filter f: node.free.cpus > 1",
            "unknown-field",
            1,
            11,
            "'cpus' is not a resource name",
            "did you mean `node.free.cpu`?",
        ),
        (
            'filter f: pod.lables["a"] == "b"',
            "unknown-field",
            1,
            11,
            "pod has no field 'lables'",
            "did you mean `pod.labels`?",
        ),
        ('filter f: nod.name == "a"', "unknown-name", 1, 11, "unknown name 'nod'", "did you mean `node`?"),
        (
            "filter f: tolerate(1)",
            "unknown-function",
            1,
            11,
            "unknown function 'tolerate'",
            "did you mean `tolerates`?",
        ),
        ('filter f: node.free.cpu > "a"', "type", 1, 11, "cannot compare quantity with string", ""),
        ("filter f: 2s < 1Gi", "type", 1, 11, "cannot compare duration with quantity", ""),
        ("filter f:\n  1 + 2", "type", 2, 3, "a filter must be bool, not number", ""),
        ('score s: "x"', "type", 1, 10, "a score must be a number, not string", ""),
        ("score s: true", "type", 1, 10, "a score must be a number, not bool", ""),
        ("score s: node.free.cpu", "type", 1, 10, "a score must be a number, not quantity", "convert with number(...)"),
        ("filter f: true else 1", "type", 1, 21, "a filter's reason must be a string or a list of strings", ""),
        ('filter f: true else ["a", 2]', "type", 1, 27, "list items must have one type", ""),
        ('score s: if true then 1 else "a"', "type", 1, 10, "if branches differ: number and string", ""),
        ("filter f: (not true) == 1", "type", 1, 12, "cannot compare bool with number", ""),
        ("filter f: not 1", "type", 1, 15, "'not' operand must be bool, not number", ""),
        ('filter f: pod.labels.app == "a"', "type", 1, 11, 'use pod.labels["app"] to read a map', ""),
        ("score s: len(1)", "type", 1, 10, "len() argument 1 must be", "len(list | map | string) -> number"),
        (
            "filter f: true\nfilter f: false",
            "duplicate-rule",
            2,
            8,
            "filter 'f' is already defined at t.rules:1:8",
            "write `override filter f` to replace it",
        ),
        ("override filter g: true", "unknown-rule", 1, 17, "cannot override filter 'g': no such filter", ""),
        (
            "filter f: true\noverride score f: 1",
            "override-kind",
            2,
            16,
            "there is no score 'f' to override",
            "write `override filter f`",
        ),
        ("disable zz", "unknown-rule", 1, 9, "cannot disable rule 'zz'", ""),
        (
            "filter f: true\ndisable score f",
            "unknown-rule",
            2,
            15,
            "cannot disable score 'f': no such score ('f' is a filter)",
            "write `disable filter f`",
        ),
        ("score s weight 0: 1", "weight", 1, 16, "weight must be a positive whole number, not 0", ""),
        ("score s weight 1.5: 1", "weight", 1, 16, "not 1.5", ""),
        ("score s weight 500m: 1", "weight", 1, 16, "not 500m", ""),
        ("score s normalize maxx: 1", "normalize", 1, 7, "unknown normalization 'maxx'", "did you mean `max`?"),
        ("let a = b\nlet b = a\nfilter f: a", "let-cycle", 1, 9, "let 'a' refers to itself through a -> b", ""),
        ("let a = a + 1\nscore s: a", "let-cycle", 1, 9, "let 'a' refers to itself", ""),
        (
            'let n = node.name == "x"\nfilter f when n: true',
            "scope",
            2,
            15,
            "let 'n' reads node, which a when guard cannot use",
            "",
        ),
        ('filter f when node.name == "a": true', "scope", 1, 15, "'node' cannot be used in a when guard", ""),
        ("filter f: victim.priority > 1", "scope", 1, 11, "'victim' cannot be used in a filter rule", ""),
        ("let v = victim.priority\nfilter f: v > 1", "scope", 2, 11, "let 'v' reads victim", ""),
        ("filter f: count(p in node.pods where any(p in node.pods)) > 0", "shadow", 1, 38, "'p' is already a name", ""),
        (
            "let x = 1\nlet x = 2\nfilter f: x > 0",
            "duplicate-let",
            2,
            5,
            "let 'x' is already defined at t.rules:1:5",
            "",
        ),
        ("let node = 1", "reserved-name", 1, 5, "'node' is a built-in name", ""),
    ],
)
def test_one_diagnostic(text: str, code: str, line: int, column: int, message: str, suggestion: str) -> None:
    found = [d for d in diagnostics(text) if d.severity is Severity.ERROR]
    assert len(found) == 1, [d.render() for d in found]
    (d,) = found
    assert (d.code, d.span.line, d.span.column) == (code, line, column), d.render()
    assert message in d.message
    assert d.suggestion == suggestion


def test_unused_let_is_a_warning() -> None:
    (d,) = diagnostics("let spare = 1\n\nfilter f: true")
    assert (d.severity, d.code, d.span.line, d.span.column) == (Severity.WARNING, "unused-let", 1, 5)
    assert d.message == "let 'spare' is never used"


@pytest.mark.parametrize("lets", ["let a = 1\nlet b = a + 1\n", "let b = a + 1\nlet a = 1\n"])
def test_a_let_only_unused_lets_use_is_unused_whatever_the_order(lets: str) -> None:
    unused = [d.message for d in diagnostics(lets + "let c = 2\nfilter f: c > 0")]
    assert sorted(unused) == ["let 'a' is never used", "let 'b' is never used"]


def test_rules_of_different_kinds_may_share_a_name() -> None:
    assert diagnostics("filter f: true\nscore f: 1\npreempt f: true") == []


def test_every_problem_is_reported_not_just_the_first() -> None:
    text = 'filter a: node.alocatable.cpu > 1\nscore b: "x"\nfilter c: nope\nfilter c: true\n'
    assert sorted(located(text), key=lambda x: x[1:]) == [
        ("unknown-field", 1, 11),
        ("type", 2, 10),
        ("unknown-name", 3, 11),
        ("duplicate-rule", 4, 8),
    ]


# --- composition ------------------------------------------------------------------------------


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


BASE = 'filter first: true\nfilter middle: pod.priority > 5 else "too low"\nscore s weight 2: 10\nfilter last: true\n'


def filter_names(rules, pod: Pod) -> list[str]:
    return [f.name for f in rules.bind(pod).filters]


def test_later_file_overrides_and_keeps_the_position(tmp_path: Path) -> None:
    base = write(tmp_path, "a.rules", BASE)
    site = write(tmp_path, "b.rules", 'override filter middle: pod.priority > 0 else "zero"\n')
    rules = load_rules([base, site])
    assert rules.names == ("first", "middle", "s", "last")
    bound = rules.bind(Pod("p", priority=1))
    assert [f.passes(None) for f in bound.filters] == [True, True, True]
    assert bound.filters[1].reasons(None) == ("zero",)
    assert rules.files == (str(base), str(site))


def test_disable_removes_a_rule(tmp_path: Path) -> None:
    rules = load_rules(
        [write(tmp_path, "a.rules", BASE), write(tmp_path, "b.rules", "disable middle\ndisable score s\n")]
    )
    assert rules.names == ("first", "last")
    assert rules.bind(Pod("p")).scores == ()


def test_extends_composes_the_base_first(tmp_path: Path) -> None:
    write(tmp_path, "base.rules", BASE)
    child = write(
        tmp_path,
        "site.rules",
        ('extends "base.rules"\n\noverride score s weight 5: 1\ndisable first\nfilter extra: pod.priority < 100\n'),
    )
    rules = load_rules([child])
    assert rules.names == ("middle", "s", "last", "extra")
    (score,) = rules.bind(Pod("p")).scores
    assert (score.weight, score.score(None)) == (5, 1)
    assert filter_names(rules, Pod("p", priority=7)) == ["middle", "last", "extra"]


def test_extends_problems(tmp_path: Path) -> None:
    write(tmp_path, "a.rules", 'extends "b.rules"\nfilter a: true\n')
    b = write(tmp_path, "b.rules", 'extends "a.rules"\nfilter b: true\n')
    missing = write(tmp_path, "c.rules", 'extends "no-such-set"\n')
    cycle = check_paths([b]).diagnostics
    assert [(d.code, d.span.source.path.endswith("a.rules"), d.span.line) for d in cycle] == [("extends", True, 1)]
    assert "a cycle" in cycle[0].message
    (d,) = check_paths([missing]).diagnostics
    assert (d.code, d.span.line, d.span.column) == ("extends", 1, 9)
    assert "cannot extend 'no-such-set'" in d.message


def test_folder_loads_its_files_in_name_order(tmp_path: Path) -> None:
    write(tmp_path, "20-site.rules", "override filter a: false\nfilter b: true\n")
    write(tmp_path, "10-base.rules", "filter a: true\n")
    write(tmp_path, "notes.txt", "filter ignored: nonsense +")
    rules = load_rules([tmp_path])
    assert rules.names == ("a", "b")
    assert [f.passes(None) for f in rules.bind(Pod("p")).filters] == [False, True]


def test_load_rules_raises_with_every_diagnostic(tmp_path: Path) -> None:
    path = write(tmp_path, "bad.rules", 'filter a: nope\nscore b: "x"\n')
    with pytest.raises(RulesError) as raised:
        load_rules([path])
    assert str(raised.value) == f"{path}:1:11: unknown name 'nope' (and 1 more)"
    assert [d.code for d in raised.value.diagnostics] == ["unknown-name", "type"]


# --- rulesched lint ---------------------------------------------------------------------------


def lint(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rulesched", "lint", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )


HEADER = re.compile(r"^\S+:(\d+:\d+:)? (error|warning): ", re.MULTILINE)


def test_lint_counts_the_rules_written_broken_ones_too(tmp_path: Path) -> None:
    """A rule with a syntax error is still a rule written (issue 34, item 13: three rules, one
    broken, were counted as two), in a file of good ones and in a file of its own."""
    one = write(tmp_path, "one.rules", 'extends "default"\nfilter a: true\nscore b: 1 +\nfilter c: true\n')
    assert lint(one).stdout.splitlines()[-1].startswith("1 file, 3 rules (extends ")
    good = write(tmp_path, "good.rules", 'extends "default"\nfilter a: true\nlet x = 1\n')
    broken = write(tmp_path, "broken.rules", "override score b weight 2:\n    1 +\n")
    also = write(tmp_path, "also.rules", "preempt p: true\ndisable filter q\n")
    assert lint(good, broken, also).stdout.splitlines()[-1].startswith("3 files, 3 rules (extends ")


def test_a_folder_is_one_set_and_a_standalone_file_a_set_of_its_own(tmp_path: Path) -> None:
    """A user's folder lints as one set: two files defining the same filter conflict. A file
    marked ``# rulesched: standalone`` (an alternative profile) is linted alone."""
    folder = tmp_path / "policy"
    folder.mkdir()
    write(folder, "a.rules", 'extends "default"\nfilter small: pod.requests.cpu < 4000\n')
    write(folder, "b.rules", "filter small: pod.requests.cpu < 2000\n")
    done = lint("--format", "json", folder)
    assert json.loads(done.stdout)["rule_sets"] == [[str(folder / "a.rules"), str(folder / "b.rules")]]
    assert done.returncode == 1 and "small" in done.stdout
    write(folder, "b.rules", '# rulesched: standalone\nextends "default"\nfilter small: pod.requests.cpu < 2000\n')
    done = lint("--format", "json", folder)
    result = json.loads(done.stdout)
    assert result["rule_sets"] == [[str(folder / "a.rules")], [str(folder / "b.rules")]]
    assert done.returncode == 0 and result["errors"] == 0, done.stdout


def test_must_show_three_located_problems(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "three.rules",
        (
            "filter fits:\n"
            "    node.allocatible.cpu >= pod.requests.cpu\n\n"
            'score busy:\n    len(node.pods) + "x"\n\n'
            "filter broken:\n    pod.priority > > 1\n"
        ),
    )
    run = lint(path)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "Traceback" not in run.stdout + run.stderr
    out = run.stdout
    assert f"{path}:2:5: error: node has no field 'allocatible' [unknown-field]" in out
    assert "        node.allocatible.cpu >= pod.requests.cpu\n        ^^^^^^^^^^^^^^^^\n" in out
    assert "help: did you mean `node.allocatable`?" in out
    assert f"{path}:5:5: error: '+' needs numbers, not number and string [type]" in out
    assert '        len(node.pods) + "x"\n        ^^^^^^^^^^^^^^^^^^^^\n' in out
    assert f"{path}:8:20: error: unexpected '>'" in out
    assert "        pod.priority > > 1\n                       ^\n" in out
    assert len(HEADER.findall(out)) == 3
    assert out.rstrip().endswith("1 file, 3 rules: 3 errors, 0 warnings")


def test_random_bytes_are_refused_in_one_line(tmp_path: Path) -> None:
    rng = random.Random(20240611)
    path = tmp_path / "noise.rules"
    path.write_bytes(bytes(rng.randrange(256) for _ in range(10_000)))
    run = lint(path)
    assert run.returncode == 2
    assert run.stdout == ""
    assert run.stderr.count("\n") == 1 and "Traceback" not in run.stderr
    assert run.stderr.startswith(f"rulesched: {path}: not UTF-8 text")


def test_random_printable_text_gives_located_errors(tmp_path: Path) -> None:
    rng = random.Random(7)
    alphabet = "abc xyz()[]{}+-*/<>=!\"'.,:;#@$%^&|\\\n\t0123456789filterscorewhen"
    path = tmp_path / "noise.rules"
    path.write_text("".join(rng.choice(alphabet) for _ in range(10_000)), encoding="utf-8")
    run = lint(path)
    assert run.returncode == 1
    assert "Traceback" not in run.stdout + run.stderr
    assert HEADER.findall(run.stdout)


def test_empty_file_is_a_warning(tmp_path: Path) -> None:
    path = write(tmp_path, "empty.rules", "")
    run = lint(path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[0] == f"{path}: warning: no rules in this file [empty]"
    assert len(HEADER.findall(run.stdout)) == 1 and "Traceback" not in run.stderr
    assert lint("--strict", path).returncode == 1


def test_megabyte_line_is_one_short_diagnostic(tmp_path: Path) -> None:
    path = write(tmp_path, "long.rules", "let x = " + "1+" * 500_000 + "1")
    run = lint(path)
    assert run.returncode == 1
    assert "Traceback" not in run.stdout + run.stderr
    assert len(HEADER.findall(run.stdout)) == 1
    assert f"{path}:1:{MAX_LINE_CHARS + 1}: error: line is 1,000,009 characters long" in run.stdout
    assert max(len(line) for line in run.stdout.splitlines()) < 200


def test_folder_without_rules_is_refused_in_one_line(tmp_path: Path) -> None:
    write(tmp_path, "README.md", "no rules here")
    run = lint(tmp_path)
    assert run.returncode == 2
    assert run.stderr == f"rulesched: {tmp_path}: no .rules files in this folder or below it\n"
    assert run.stdout == ""


def test_missing_path_is_refused_in_one_line(tmp_path: Path) -> None:
    run = lint(tmp_path / "absent.rules")
    assert (run.returncode, run.stderr.count("\n"), run.stdout) == (2, 1, "")
    assert "no such file or folder" in run.stderr


def test_json_format(tmp_path: Path) -> None:
    path = write(tmp_path, "j.rules", 'let spare = 1\n\nfilter f: node.nmae == "a"\n')
    run = lint("--format", "json", path)
    assert run.returncode == 1
    report = json.loads(run.stdout)
    assert (report["errors"], report["warnings"], report["rules"]) == (1, 1, 1)
    assert report["diagnostics"] == [
        {
            "path": str(path),
            "line": 1,
            "column": 5,
            "severity": "warning",
            "code": "unused-let",
            "message": "let 'spare' is never used",
            "suggestion": None,
        },
        {
            "path": str(path),
            "line": 3,
            "column": 11,
            "severity": "error",
            "code": "unknown-field",
            "message": "node has no field 'nmae'",
            "suggestion": "did you mean `node.name`?",
        },
    ]


def test_strict_turns_a_warning_into_failure(tmp_path: Path) -> None:
    path = write(tmp_path, "w.rules", "let spare = 1\nfilter f: true\n")
    relaxed, strict = lint(path), lint("--strict", path)
    assert (relaxed.returncode, strict.returncode) == (0, 1)
    assert relaxed.stdout == strict.stdout
    assert "warning: let 'spare' is never used [unused-let]" in strict.stdout


def test_clean_file_exits_zero(tmp_path: Path) -> None:
    # (a set of its own, with no resource-fit filter: clean for the extender, which it says)
    text = "# rulesched: extender\nfilter f: pod.priority >= 0\nscore s: 1\n"
    run = lint("--strict", write(tmp_path, "ok.rules", text))
    assert (run.returncode, HEADER.findall(run.stdout)) == (0, [])
