"""A column evaluation that raises falls back node by node (the scheduler never stops for a column
bug), is counted and logged once per (rule, error type); a test during which one happened fails
(tests/conftest.py), whichever thread it happened in. Planned fallbacks (Unsupported) stay silent.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from rulesched import engine
from tests.helpers.columns import DeliberatelyBroken, break_columns, column_answers, roomy_cluster

ROOT = Path(__file__).resolve().parents[1]


def test_planned_fallbacks_are_silent(caplog: pytest.LogCaptureFixture) -> None:
    rules, snapshot = roomy_cluster()
    with caplog.at_level(logging.WARNING):
        columns, node_by_node, bound = column_answers(rules, snapshot)
    assert columns == node_by_node == [True, True, True, False, False]
    assert engine.columns_of(bound) is not None and engine.columns_of(bound).evaluator.fallbacks.count == 0
    assert caplog.records == []  # `huge` raised Unsupported: planned, not a bug


@pytest.mark.column_fallbacks
def test_a_broken_column_evaluation_falls_back_is_counted_and_logged_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, column_fallbacks: object
) -> None:
    break_columns(monkeypatch, "<")
    rules, snapshot = roomy_cluster()
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            columns, node_by_node, bound = column_answers(rules, snapshot)
            assert columns == node_by_node == [True, True, True, False, False]  # still right
    assert engine.columns_of(bound) is not None and engine.columns_of(bound).evaluator.fallbacks.count == 3
    seen = column_fallbacks.seen
    assert [(f.rule, f.pod, type(f.error)) for f in seen] == [("roomy", "default/incoming", DeliberatelyBroken)] * 3
    (warning,) = caplog.records  # once per (rule, error type), with the traceback
    assert warning.levelname == "WARNING" and warning.rule == "roomy"
    assert warning.pod == "default/incoming" and warning.exc_info is not None
    assert "DeliberatelyBroken" in warning.getMessage()


INNER = """
import threading

from tests.helpers.columns import break_columns, column_answers, roomy_cluster


def test_sound_columns():
    columns, node_by_node, _ = column_answers(*roomy_cluster())
    assert columns == node_by_node


def test_broken_here(monkeypatch):
    break_columns(monkeypatch, "<")
    columns, node_by_node, _ = column_answers(*roomy_cluster())
    assert columns == node_by_node  # right answers: the fallback hides the bug but for the fixture


def test_broken_in_another_thread(monkeypatch):
    break_columns(monkeypatch, "<")
    answers = []
    thread = threading.Thread(target=lambda: answers.append(column_answers(*roomy_cluster())))
    thread.start()
    thread.join()
    columns, node_by_node, _ = answers[0]
    assert columns == node_by_node
"""


def test_the_shared_fixture_fails_tests_that_had_a_column_fallback(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tests/conftest.py itself, run on tests that break the column evaluator: they fail, with the
    rule and the error named, although every answer they check is right."""
    pytester.makeconftest((ROOT / "tests" / "conftest.py").read_text(encoding="utf-8"))
    pytester.makepyfile(test_inner=INNER)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=1, failed=2)
    output = result.stdout.str()
    assert "FAILED test_inner.py::test_broken_here" in output
    assert "FAILED test_inner.py::test_broken_in_another_thread" in output
    assert "UnexpectedColumnFallback" in output  # in the test's thread: raised where it happened
    assert "rule roomy: DeliberatelyBroken" in output
