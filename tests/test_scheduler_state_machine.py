"""A stateful property test of ClusterStore + Scheduler under the default rules.

Hypothesis drives a cluster through node adds/removes/cordons, running-pod adds and deletes,
pending-pod adds, single scheduling cycles and run-until-settled, with a Binder test double that
fails binds as drawn. After every step the cluster's bookkeeping must match a recomputation from
scratch and no node may be overcommitted. At every bind, the chosen node is re-checked: on a copy
of the cluster rebuilt from scratch without the pod, a binding of a separately loaded copy of the
default rules (no cache shared with the scheduler) must pass every filter on that node (the
scheduler never places a pod where a filter rejects it); when a cycle finds no node, the same
reference check must reject every node. A failed bind must leave
no assumed pod behind and requeue the pod with backoff.

Pods may mount PersistentVolumeClaims of a fixed pool: WaitForFirstConsumer claims provisioned
where the class's allowed zones say, ReadWriteOncePod ones, a ReadWriteMany one shared by many,
and claims of a class with static zonal volumes only. The store records each placement's volume
choice, so the reference check above sees the claims as the scheduler left them; in addition a
placed pod's bound volumes always fit its node, no ReadWriteOncePod claim is ever mounted by two
placed pods, the store's count of each claim's users matches a recount, and a failed bind leaves
no volume choice behind.

Deleting a *pending* pod is not modelled: the Scheduler has no API to drop a queued pod.
"""

from __future__ import annotations

import dataclasses
import functools
from collections import Counter, deque
from collections.abc import Sequence
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from rulesched.cluster.store import ClusterStore
from rulesched.engine import EngineSettings
from rulesched.lang import RuleSet, load_rules, resolve_rules_path
from rulesched.model import Node, Pod
from rulesched.model.storage import READ_WRITE_ONCE_POD, StorageState
from rulesched.scheduler.framework import Binding, Code, SchedulerSettings
from rulesched.semantics.volumes import pv_fits_node
from rulesched.simulate.driver import Simulation
from tests.helpers.profiles import examples
from tests.upstream.harness import csinode, default_rules, node, pod, pv, pvc, storage, storage_class

GPU = "nvidia.com/gpu"
CHECKED = ("cpu", "memory", GPU)
ZONES = ("zone-a", "zone-b", "zone-c")
GPU_TOLERATION = {"key": GPU, "operator": "Exists", "effect": "NoSchedule"}
ZONE = "topology.kubernetes.io/zone"


def _claim(name: str, cls: str, mode: str) -> Any:
    return pvc(
        name, spec={"storageClassName": cls, "accessModes": [mode], "resources": {"requests": {"storage": "1Gi"}}}
    )


def _static_volume(zone: str, i: int) -> Any:
    term = {"matchExpressions": [{"key": ZONE, "operator": "In", "values": [zone]}]}
    spec = {
        "storageClassName": "static",
        "capacity": {"storage": "5Gi"},
        "accessModes": ["ReadWriteOnce"],
        "nodeAffinity": {"required": {"nodeSelectorTerms": [term]}},
    }
    return pv(f"static-{zone}-{i}", spec=spec)


def volume_pool() -> StorageState:
    """Claims pods may mount: provisioned in zone-a or zone-b only ("zonal"), ReadWriteOncePod,
    one ReadWriteMany claim, and claims matched to two static volumes in zone-c."""
    zones = [{"matchLabelExpressions": [{"key": ZONE, "values": ["zone-a", "zone-b"]}]}]
    return storage(
        volumes=[_static_volume("zone-c", i) for i in range(2)],
        claims=[
            *(_claim(f"data-{i}", "zonal", "ReadWriteOnce") for i in range(4)),
            *(_claim(f"solo-{i}", "zonal", "ReadWriteOncePod") for i in range(2)),
            _claim("shared", "zonal", "ReadWriteMany"),
            *(_claim(f"local-{i}", "static", "ReadWriteOnce") for i in range(3)),
        ],
        classes=[
            storage_class("zonal", provisioner="csi.example.com", mode="WaitForFirstConsumer", topologies=zones),
            storage_class("static", provisioner="kubernetes.io/no-provisioner", mode="WaitForFirstConsumer"),
        ],
    )


# Interleaved kinds: hypothesis draws early items more often, and every kind should come up.
CLAIMS = ("solo-0", "data-0", "local-0", "shared", "data-1", "solo-1", "local-1", "data-2", "local-2", "data-3")


@st.composite
def node_shapes(draw: Any) -> dict[str, Any]:
    gpus = draw(st.sampled_from([0, 0, 2, 4]))
    allocatable = {
        "cpu": draw(st.sampled_from(["1", "2", "4"])),
        "memory": draw(st.sampled_from(["2Gi", "4Gi", "8Gi"])),
        "pods": draw(st.sampled_from(["2", "3", "110"])),
    }
    if gpus:
        allocatable[GPU] = str(gpus)
    taints = [{"key": GPU, "value": "present", "effect": "NoSchedule"}] if gpus and draw(st.booleans()) else []
    return {
        "allocatable": allocatable,
        "taints": taints,
        "zone": draw(st.sampled_from(ZONES)),
        "unschedulable": draw(st.sampled_from([False] * 7 + [True])),
        # The CSINode's attach limit for the zonal class's driver (None: no CSINode)
        "attach": draw(st.sampled_from([None, None, 0, 1, 2, 39])),
    }


@st.composite
def pod_shapes(draw: Any) -> dict[str, Any]:
    """A pod spec fragment and labels; a few pods carry constraints that read other pods."""
    requests = {}
    cpu = draw(st.sampled_from([None, "100m", "500m", "1", "2"]))
    memory = draw(st.sampled_from([None, "128Mi", "1Gi", "3Gi"]))
    if cpu:
        requests["cpu"] = cpu
    if memory:
        requests["memory"] = memory
    gpu = draw(st.sampled_from([0, 0, 0, 1, 2]))
    container: dict[str, Any] = {
        "name": "c",
        "image": draw(st.sampled_from(["busybox", "nginx:1.27"])),
        "resources": {"requests": requests, **({"limits": {GPU: str(gpu)}} if gpu else {})},
    }
    app = draw(st.sampled_from(["web", "db"]))
    spec: dict[str, Any] = {"containers": [container], "priority": draw(st.sampled_from([0, 0, 10]))}
    selector = {"matchLabels": {"app": app}}
    for extra in draw(
        st.sets(st.sampled_from(["port", "zone", "tolerate", "anti", "spread", "soft-spread", "claim"]), max_size=2)
    ):
        if extra == "port":
            container["ports"] = [{"containerPort": 80, "hostPort": 8080}]
        elif extra == "zone":
            spec["nodeSelector"] = {"topology.kubernetes.io/zone": draw(st.sampled_from(ZONES))}
        elif extra == "tolerate":
            spec["tolerations"] = [GPU_TOLERATION]
        elif extra == "claim":
            spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": draw(st.sampled_from(CLAIMS))}}]
        elif extra == "anti":
            spec["affinity"] = {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": selector, "topologyKey": "kubernetes.io/hostname"}
                    ]
                }
            }
        else:
            spec["topologySpreadConstraints"] = [
                {
                    "maxSkew": 1,
                    "topologyKey": "topology.kubernetes.io/zone",
                    "labelSelector": selector,
                    "whenUnsatisfiable": "DoNotSchedule" if extra == "spread" else "ScheduleAnyway",
                }
            ]
    if gpu:
        spec.setdefault("tolerations", [GPU_TOLERATION])
    return {"spec": spec, "labels": {"app": app}}


class PlannedBinder:
    """Binds succeed or fail as planned (then succeed). Every bind re-checks the placement."""

    def __init__(self, machine: SchedulerMachine) -> None:
        self.machine = machine
        self.plan: deque[bool] = deque()
        self.calls: list[tuple[str, str, bool]] = []

    def bind(self, binding: Binding) -> bool:
        pod, node = binding.pod, binding.node
        self.machine.check_placement(pod, node)
        ok = self.plan.popleft() if self.plan else True
        self.calls.append((pod.key, node, ok))
        return ok


@functools.lru_cache(maxsize=1)
def reference_rules() -> RuleSet:
    """The default rules loaded a second time: checks never share the scheduler's binding caches."""
    return load_rules([resolve_rules_path("default")])


def fresh_copy(state: ClusterStore, without: str | None = None, extra: Sequence[Pod] = ()) -> ClusterStore:
    """The cluster rebuilt from scratch (new NodeInfos, empty memos), optionally without one pod
    and with ``extra`` pods (placed on their nodes) added."""
    return ClusterStore.build(
        [info.node for info in state.nodes],
        [*(p for p in state.pods() if p.key != without), *extra],
        state.pdbs,
        state.namespaces,
        storage=state.storage,
    )


def _sum(pods: list[Pod], attr: str) -> dict[str, int]:
    total: Counter[str] = Counter()
    for p in pods:
        total.update(getattr(p, attr))
    return {k: v for k, v in total.items() if v}


class SchedulerMachine(RuleBasedStateMachine):
    settings = SchedulerSettings()

    def __init__(self) -> None:
        super().__init__()
        self.rules = default_rules()
        self.state = ClusterStore(provision=True)  # the simulator's store: claims provisioned at once
        self.state.set_storage(volume_pool())
        self.binder = PlannedBinder(self)
        self.scheduler = Simulation(self.rules, self.state, self.settings, self.binder)
        self.clock = self.scheduler.clock
        self.counter = 0
        self.placements = 0

    def _name(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def check_placement(self, placed: Pod, node_name: str) -> None:
        """At bind time the pod is assumed on the node; without it, the node must pass every filter."""
        assert self.state.is_assumed(placed.key) and self.state.pod_node(placed.key) == node_name
        without = fresh_copy(self.state, without=placed.key)
        info = without.node_view(node_name)
        assert info is not None
        failure = reference_rules().bind(dataclasses.replace(placed, node_name=""), without).first_failure(info)
        assert failure is None, f"{placed.key} placed on {node_name} but {failure[0].name} rejects: {failure[1]}"

    def _on_a_node(self, key: str) -> bool:
        return any(p.key == key for info in self.state.nodes for p in info.pods)

    # --- cluster changes -----------------------------------------------------------------------
    @initialize(shapes=st.lists(node_shapes(), min_size=1, max_size=3))
    def start(self, shapes: list[dict[str, Any]]) -> None:
        for shape in shapes:
            self.add_node(shape)

    @rule(shape=node_shapes())
    def add_node(self, shape: dict[str, Any]) -> None:
        name = self._name("n")
        self.state.add_node(
            node(
                name,
                labels={"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": shape["zone"]},
                allocatable=shape["allocatable"],
                taints=shape["taints"],
                unschedulable=shape["unschedulable"],
                images=[(["docker.io/library/nginx:1.27", "nginx:1.27"], 200_000_000)],
            )
        )
        if shape["attach"] is not None:
            self.state.volumes.put("csinodes", name, csinode(name, {"csi.example.com": shape["attach"]}))
        self.scheduler.queue.cluster_changed()

    @precondition(lambda self: self.state.nodes)
    @rule(data=st.data())
    def remove_node(self, data: Any) -> None:
        info = data.draw(st.sampled_from(list(self.state.nodes)))
        keys = [p.key for p in info.pods]
        gone = self.state.remove_node(info.name)
        assert sorted(p.key for p in gone) == sorted(keys)
        assert self.state.node_view(info.name) is None
        for key in keys:
            assert self.state.pod_node(key) is None and not self._on_a_node(key)

    @precondition(lambda self: self.state.nodes)
    @rule(data=st.data())
    def toggle_cordon(self, data: Any) -> None:
        info = data.draw(st.sampled_from(list(self.state.nodes)))
        n: Node = info.node
        self.state.update_node(dataclasses.replace(n, unschedulable=not n.unschedulable))
        self.scheduler.queue.cluster_changed()

    @precondition(lambda self: self.state.nodes)
    @rule(data=st.data(), shape=pod_shapes())
    def add_running_pod(self, data: Any, shape: dict[str, Any]) -> None:
        """A pod bound by someone else; only added where it fits, so nodes stay within allocatable."""
        info = data.draw(st.sampled_from(list(self.state.nodes)))
        spec = {k: v for k, v in shape["spec"].items() if k != "volumes"}  # (claims are the scheduler's to place)
        p = pod(self._name("r"), spec={**spec, "priority": 0}, labels=shape["labels"], node_name=info.name)
        if len(info.pods) >= info.allocatable.get("pods", 0) // 1000:
            return
        if any(v > info.free.get(r, 0) for r, v in p.requests.items()):
            return
        self.state.add_pod(p)
        self.scheduler.queue.cluster_changed()

    @precondition(lambda self: any(info.pods for info in self.state.nodes))
    @rule(data=st.data())
    def delete_pod(self, data: Any) -> None:
        key = data.draw(st.sampled_from(sorted(p.key for p in self.state.pods())))
        assert self.state.remove_pod(key) is not None
        assert self.state.pod_node(key) is None and not self._on_a_node(key)
        self.scheduler.queue.cluster_changed()

    @rule(shape=pod_shapes(), replicas=st.integers(1, 4))
    def add_pending_pods(self, shape: dict[str, Any], replicas: int) -> None:
        """Replicas are equal but for their names: the rules' equivalence-class cache shares them."""
        for _ in range(replicas):
            self.scheduler.add(pod(self._name("p"), spec=shape["spec"], labels=shape["labels"]))

    @rule(seconds=st.sampled_from([1.0, 5.0, 20.0]))
    def advance_clock(self, seconds: float) -> None:
        self.clock.now += seconds

    # --- scheduling ----------------------------------------------------------------------------
    @rule(bind_ok=st.booleans())
    def schedule_one(self, bind_ok: bool) -> None:
        self.binder.plan = deque([bind_ok])
        calls = len(self.binder.calls)
        result = self.scheduler.schedule_one()
        self.binder.plan.clear()
        if result is None:
            assert len(self.binder.calls) == calls
            return
        key, queue = result.pod.key, self.scheduler.queue
        if result.code is Code.SCHEDULED:
            assert self.binder.calls[calls:] == [(key, result.node, True)]
            assert self.state.pod_node(key) == result.node and not self.state.is_assumed(key)
            assert self.scheduler.history[key].node == result.node
        elif result.code is Code.BIND_FAILED:
            assert self.binder.calls[calls:] == [(key, result.node, False)]
            assert not self.state.is_assumed(key)
            assert self.state.pod_node(key) is None and not self._on_a_node(key)
            assert any(e.pod.key == key for e in queue._error_backoff), "a failed bind must requeue with backoff"
        else:
            assert len(self.binder.calls) == calls
            assert self.state.pod_node(key) is None
            # no node was feasible: a fresh binding must reject every node (all are evaluated below 100)
            fresh = fresh_copy(self.state)
            bound = reference_rules().bind(result.pod, fresh)
            preemption = result.preemption
            if preemption is not None and preemption.nominated is not None:
                for victim in preemption.victims:
                    assert self.state.pod_node(victim.key) is None
                assert any(
                    e.pod.key == key and e.pod.nominated_node_name == preemption.nominated for e in queue._active
                )
            else:
                # A node holding pods nominated there (priority at least this pod's) must fit it
                # with them too, as upstream's two filter passes ask.
                reserved = self.scheduler.scheduler.nominator.reserved_for(result.pod)
                held = reserved.nodes if reserved is not None else {}
                crowded = fresh_copy(self.state, extra=[p for pods in held.values() for p in pods])
                bound_crowded = reference_rules().bind(result.pod, crowded)
                for info in fresh.nodes:
                    fits = bound.first_failure(info) is None
                    if fits and info.name in held:
                        fits = bound_crowded.first_failure(crowded.node_view(info.name)) is None
                    assert not fits, f"{key} was unschedulable but fits {info.name}"
                assert key in queue._unschedulable

    @rule(plan=st.lists(st.booleans(), max_size=4))
    def run_until_settled(self, plan: list[bool]) -> None:
        self.binder.plan = deque(plan)
        self.scheduler.run()
        queue = self.scheduler.queue
        assert not queue._active and not queue._backoff and not queue._error_backoff, (
            "run() returned before the queue settled"
        )
        self.binder.plan.clear()
        for key in queue._unschedulable:
            assert self.state.pod_node(key) is None

    # --- invariants ----------------------------------------------------------------------------
    @invariant()
    def within_allocatable(self) -> None:
        for info in self.state.nodes:
            assert len(info.pods) <= info.allocatable.get("pods", 0) // 1000, info
            for r in CHECKED:
                assert info.requested.get(r, 0) <= info.allocatable.get(r, 0), (info, r)

    @invariant()
    def aggregates_match_a_recount(self) -> None:
        for info in self.state.nodes:
            assert info.requested == _sum(info.pods, "requests"), info
            assert info.nonzero_requested == _sum(info.pods, "nonzero_requests"), info
            for r in info.allocatable.keys() | info.requested.keys():
                assert info.free.get(r, 0) == info.allocatable.get(r, 0) - info.requested.get(r, 0), (info, r)
            assert Counter(info.used_ports) == Counter(port for p in info.pods for port in p.host_ports)
            assert info.claim_mounts == sum(len(p.claims) for p in info.pods), info

    @invariant()
    def index_consistent_and_nothing_assumed(self) -> None:
        seen: set[str] = set()
        for info in self.state.nodes:
            for p in info.pods:
                assert p.key not in seen, f"{p.key} is on two nodes"
                seen.add(p.key)
                assert p.node_name == info.name and self.state.pod_node(p.key) == info.name
                assert not self.state.is_assumed(p.key), f"{p.key} still assumed after its bind finished"
        images = Counter(name for info in self.state.nodes for name in info.images)
        for name, count in images.items():
            assert self.state.image_node_count(name) == count
        affinity = sorted(p.key for p, _ in self.state.affinity_pods())
        assert affinity == sorted(p.key for p in self.state.pods() if p.pod_anti_affinity or p.pod_affinity)

    @invariant()
    def volumes_hold(self) -> None:
        """Bound volumes fit their pods' nodes; ReadWriteOncePod claims have one pod at most;
        claim users match a recount; no volume choice outlives its binding."""
        storage = self.state.storage
        users: Counter[str] = Counter()
        for info in self.state.nodes:
            for p in info.pods:
                for name in p.claims:
                    key = f"{p.namespace}/{name}"
                    users[key] += 1
                    claim = storage.claims[key]
                    if claim.volume_name:
                        assert pv_fits_node(storage.volumes[claim.volume_name], info), (p.key, key, info.name)
        for key, count in users.items():
            assert self.state.claim_users(key) == count, key
            if READ_WRITE_ONCE_POD in storage.claims[key].access_modes:
                assert count <= 1, f"{key} (ReadWriteOncePod) is mounted by {count} pods"
        assert not self.state.volumes.in_flight()


SchedulerMachine.TestCase.settings = settings(
    max_examples=examples(50),
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestSchedulerStateMachine = SchedulerMachine.TestCase


class ColumnsMachine(SchedulerMachine):
    """The same, with every walk evaluated as columns (node tables, volume filters' uniform,
    per-label-group and attach-count answers) however few the nodes."""

    settings = SchedulerSettings(engine=EngineSettings(columns_from=1))


ColumnsMachine.TestCase.settings = SchedulerMachine.TestCase.settings
TestColumnsStateMachine = ColumnsMachine.TestCase
