"""Property: a diagnosis alone (``SchedulerSettings.diagnose`` without ``explanation``: what
``rulesched run`` asks of a cycle that finds no node, for its FailedScheduling annotation and
metrics) gives every unschedulable attempt the same reason codes, node counts and nearest nodes
as the summary explanation, though it keeps no reason groups nor names (rulesched/scheduler/
explanation.py, ``codes_only``); on generated clusters, the walk's kept failures read as columns."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from rulesched.cluster.store import ClusterStore
from rulesched.engine import EngineSettings
from rulesched.scheduler.framework import EXPLAIN_SUMMARY, Code, SchedulerSettings
from tests.helpers.scenarios import NAMESPACES, SETTINGS, Scenario, scenarios, schedule


def _attempts(scenario: Scenario, seed: int, explanation: str) -> list[tuple[Any, ...]]:
    state = ClusterStore.build(scenario.nodes, scenario.running, namespaces=NAMESPACES)
    settings = SchedulerSettings(
        seed=seed, diagnose=True, explanation=explanation, engine=EngineSettings(columns_from=1)
    )
    out = []
    for r in schedule(scenario, state, settings):
        codes = [c.summary_json() for c in r.reason_codes()]
        named = () if r.explanation is None else (r.explanation.groups, r.explanation.unresolvable_names)
        unresolvable = r.explanation.unresolvable if r.explanation is not None and r.node is None else None
        out.append((r.pod.key, r.code, r.node, r.message, codes, unresolvable, named))
    return out


@SETTINGS
@given(scenarios(), st.integers(0, 2**16))
def test_a_diagnosis_gives_the_summarys_codes(scenario: Scenario, seed: int) -> None:
    summary = _attempts(scenario, seed, EXPLAIN_SUMMARY)
    diagnosis = _attempts(scenario, seed, "")
    assert [a[:6] for a in diagnosis] == [a[:6] for a in summary]
    for attempt in diagnosis:
        if attempt[1] is Code.UNSCHEDULABLE and attempt[6]:
            groups, names = attempt[6]
            assert not names  # (the node-by-node fallback keeps them: only the alike rows do not)
