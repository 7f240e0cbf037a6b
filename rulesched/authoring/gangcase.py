"""Group cases of ``rulesched test``: a pod group's members placed as the scheduler places them.

A case with ``group`` and ``members`` (:mod:`rulesched.authoring.testfile`) runs the simulator's
scheduler (:class:`rulesched.simulate.driver.Simulation`, every node scored, seed 0) on the
case's cluster until it settles, and checks what came of the group (``expect.group``: placed or
not, a part of its message) and of each member (``expect.members``: its node, or null).
Next stage: :mod:`rulesched.authoring.ruletest` reports it with the other cases.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from rulesched.authoring.testcase import Case, Expect
from rulesched.lang import RuleSet
from rulesched.scheduler.framework import SchedulerSettings
from rulesched.simulate.driver import Simulation


def run_group(rules: RuleSet, case: Case) -> tuple[Mapping[str, str], bool, str]:
    """Each member's node ("" when not bound), whether the group was placed, and its message
    (its last attempt's, or the members' message when it was not attempted)."""
    assert case.group is not None
    store = case.cluster.store()
    simulation = Simulation(rules, store, SchedulerSettings(percentage_of_nodes_to_score=100))
    for group in case.groups or (case.group,):
        simulation.add_group(group)
    for member in case.members:
        simulation.add(member)
    simulation.run()
    nodes = {m.name: simulation.history[m.key].node or "" for m in case.members}
    outcomes = [o for o in simulation.scheduler.gangs.outcomes if o.group.key == case.group.key]
    placed = any(o.placed for o in outcomes)
    message = next((o.message for o in reversed(outcomes) if o.message), "")
    last = [h.last for m in case.members if (h := simulation.history[m.key]).last is not None]
    if not placed and last:
        message = last[0].group_message or message
    return MappingProxyType(nodes), placed, message


def compare_group(expect: Expect, nodes: Mapping[str, str], placed: bool, message: str) -> list[str]:
    failures = []
    if expect.group_placed is not None and expect.group_placed != placed:
        failures.append(
            f"group: expected {'placed' if expect.group_placed else 'not placed'}, got {message or 'placed'}"
        )
    if expect.group_message is not None and expect.group_message not in message:
        failures.append(f"group message: expected it to contain {expect.group_message!r}, got {message!r}")
    for name, node in (expect.members or {}).items():
        if nodes.get(name, "") != node:
            failures.append(f"member {name}: expected {node or 'not bound'}, got {nodes.get(name) or 'not bound'}")
    return failures
