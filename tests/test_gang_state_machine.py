"""A stateful property test of gang scheduling: gangs, single pods and preemptions interleaved.

Hypothesis adds gangs (their PodGroup and members, all at once or the members in two waves),
single pods of several priorities (which preempt, gang members among their victims), deletes
running single pods, and runs single cycles or the scheduler until it settles, on virtual time
(group timeouts pass). After every step: every known group has 0 or at least its minimum of
members on nodes, no node holds more than it has, and no pod is on two nodes.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from rulesched.cluster.store import ClusterStore
from rulesched.model import Pod
from rulesched.model.groups import POD_GROUP_LABEL, decode_pod_group, group_key
from rulesched.scheduler.framework import SchedulerSettings
from rulesched.simulate.driver import Simulation
from tests.upstream.harness import default_rules, node, pod

NODES = 4
CPU = 4
PRIORITIES = (0, 50, 200)


def _pod(name: str, cpu: int, priority: int, group: str | None = None, bound: str = "") -> Pod:
    labels = {POD_GROUP_LABEL: group} if group else {}
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": str(cpu)}}}],
        "priority": priority,
    }
    return pod(name, labels=labels, spec=spec, node_name=bound)


class GangMachine(RuleBasedStateMachine):
    @initialize()
    def start(self) -> None:
        nodes = [node(f"n{i}", allocatable={"cpu": str(CPU), "memory": "16Gi", "pods": "110"}) for i in range(NODES)]
        self.sim = Simulation(default_rules(), ClusterStore.build(nodes, []), SchedulerSettings())
        self.groups: dict[str, int] = {}  # group key -> its minimum
        self.later: list[Pod] = []  # members of the second wave, not added yet
        self.count = 0

    def _name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    @rule(
        size=st.integers(1, 5),
        slack=st.integers(0, 1),
        cpu=st.integers(1, 3),
        priority=st.sampled_from(PRIORITIES),
        waves=st.booleans(),
    )
    def add_gang(self, size: int, slack: int, cpu: int, priority: int, waves: bool) -> None:
        name = self._name("g")
        minimum = max(1, size - slack)
        obj = {
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"minMember": minimum, "scheduleTimeoutSeconds": 20},
        }
        self.sim.add_group(decode_pod_group(obj, "test"))
        self.groups[f"default/{name}"] = minimum
        members = [_pod(f"{name}-m{i}", cpu, priority, group=name) for i in range(size)]
        first = members[: max(1, size // 2)] if waves else members
        for member in first:
            self.sim.add(member)
        self.later.extend(members[len(first) :])

    @rule()
    def second_wave(self) -> None:
        for member in self.later:
            self.sim.add(member)
        self.later = []

    @rule(cpu=st.integers(1, 4), priority=st.sampled_from(PRIORITIES))
    def add_single(self, cpu: int, priority: int) -> None:
        self.sim.add(_pod(self._name("s"), cpu, priority))

    @rule(data=st.data())
    def delete_single(self, data: st.DataObject) -> None:
        singles = sorted(p.key for p in self.sim.store.pods() if group_key(p) is None)
        if singles:
            key = data.draw(st.sampled_from(singles))
            self.sim.store.remove_pod(key)
            self.sim.scheduler.queue.cluster_changed()

    @rule()
    def schedule_one(self) -> None:
        self.sim.schedule_one()

    @rule()
    def settle(self) -> None:
        self.sim.run()

    @invariant()
    def groups_all_or_nothing(self) -> None:
        if not hasattr(self, "sim"):
            return
        placed = Counter(group_key(p) for p in self.sim.store.pods())
        for key, minimum in self.groups.items():
            assert placed[key] == 0 or placed[key] >= minimum, (key, placed[key], minimum)

    @invariant()
    def nodes_not_overcommitted(self) -> None:
        if not hasattr(self, "sim"):
            return
        keys = [p.key for p in self.sim.store.pods()]
        assert len(keys) == len(set(keys))
        for info in self.sim.store.nodes:
            assert info.requested.get("cpu", 0) <= CPU * 1000, info.name
        assert not any(self.sim.store.is_assumed(k) for k in keys)  # nothing of an attempt stays assumed


GangMachine.TestCase.settings = settings(
    max_examples=60, stateful_step_count=30, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestGangs = GangMachine.TestCase
