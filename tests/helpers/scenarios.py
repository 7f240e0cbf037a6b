"""Generated clusters for the properties that compare the fast paths (bindings, node tables,
columns, the scheduler) with the reference interpreter: nodes, running and pending pods from a
template and its variants, events between cycles, and the ways to replay them.

tests/test_fast_path_property.py explains the scenarios; tests/test_node_table.py,
tests/test_shared_columns.py, tests/test_failure_order.py and tests/test_metrics.py use them too.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from rulesched.cluster.store import ClusterStore
from rulesched.engine import ColumnStore, NodeTable
from rulesched.lang import RuleSet
from rulesched.model import Node, Pod
from rulesched.scheduler.framework import Binding, CycleResult, SchedulerSettings
from rulesched.scheduler.scheduler import Scheduler
from rulesched.simulate.driver import VirtualClock
from tests.helpers.profiles import examples
from tests.upstream.harness import default_rules, node, pod

ZONE, HOST = "topology.kubernetes.io/zone", "kubernetes.io/hostname"
ZONES, APPS = ("z1", "z2", "z3"), ("web", "db", "cache")
NAMESPACES = {"default": {"env": "prod"}, "other": {"env": "dev"}}
MB = 1024 * 1024
IMAGES = (("nginx:1.0",), ("redis:latest", "docker.io/library/redis:latest"), ("busybox:latest",))
SETTINGS = settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# --- strategies ---------------------------------------------------------------------------------


@st.composite
def node_kwargs(draw: Any) -> dict[str, Any]:
    """A node's shape without its name (``hostname`` says whether it carries the hostname label)."""
    labels = {}
    if draw(st.integers(0, 4)) < 4:
        labels[ZONE] = draw(st.sampled_from(ZONES))
    if draw(st.booleans()):
        labels["disk"] = draw(st.sampled_from(["ssd", "hdd"]))
    taint = st.fixed_dictionaries(
        {
            "key": st.sampled_from(["dedicated", "gpu"]),
            "value": st.sampled_from(["x", "y"]),
            "effect": st.sampled_from([*["PreferNoSchedule"] * 3, "NoSchedule"]),
        }
    )
    return {
        "labels": labels,
        "hostname": draw(st.integers(0, 5)) < 5,
        "allocatable": {
            "cpu": draw(st.sampled_from([*["4", "2", "4", "8"] * 3, "0"])),
            "memory": draw(st.sampled_from([*["8Gi", "2Gi", "4Gi", "8Gi"] * 3, "0"])),
            "pods": draw(st.sampled_from(["110", "3", "6", "110"])),
        },
        "taints": draw(st.lists(taint, max_size=2, unique_by=lambda t: (t["key"], t["effect"]))),
        "unschedulable": draw(st.integers(0, 9)) == 9,
        "images": [
            (names, draw(st.sampled_from([10 * MB, 100 * MB, 600 * MB])))
            for names in draw(st.lists(st.sampled_from(IMAGES), max_size=2, unique=True))
        ],
    }


def build_node(name: str, kw: dict[str, Any]) -> Node:
    labels = {**kw["labels"], **({HOST: name} if kw["hostname"] else {})}
    return node(name, labels, kw["allocatable"], kw["taints"], kw["unschedulable"], kw["images"])


namespace_parts = st.sampled_from(
    [
        {},
        {},
        {"namespaces": ["default", "other"]},
        {"namespaceSelector": {"matchLabels": {"env": "prod"}}},
        {"namespaceSelector": {}},
    ]
)
node_expressions = st.one_of(
    st.builds(
        lambda op, vs: {"key": ZONE, "operator": op, "values": vs},
        st.sampled_from(["In", "NotIn"]),
        st.lists(st.sampled_from(ZONES), min_size=1, max_size=2, unique=True),
    ),
    st.builds(lambda op: {"key": "disk", "operator": op}, st.sampled_from(["Exists", "DoesNotExist"])),
)
node_terms = st.builds(lambda e: {"matchExpressions": e}, st.lists(node_expressions, min_size=1, max_size=2))
tolerations = st.sampled_from(
    [
        {"key": "dedicated", "operator": "Equal", "value": "x", "effect": "NoSchedule"},
        {"key": "gpu", "operator": "Exists"},
        {"operator": "Exists"},
        {"key": "dedicated", "operator": "Exists", "effect": "PreferNoSchedule"},
        {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
    ]
)


def _maybe(strategy: Any, max_size: int, chance: int) -> Any:
    """Usually nothing; one time in ``chance`` a short list (shrinks towards nothing)."""
    return st.sampled_from([False] * (chance - 1) + [True]).flatmap(
        lambda some: st.lists(strategy, min_size=1, max_size=max_size) if some else st.just([])
    )


def components(app: str, pending: bool, rich: bool = False) -> dict[str, Any]:
    """Strategies for each part of a pod whose ``app`` label is ``app``; selectors pick it half
    the time, so pods of one template select each other (spreading, (anti-)affinity). A ``rich``
    pod always has preferred pod (anti-)affinity terms and spreading, often required terms."""
    apps = st.sampled_from([app, app, *APPS])
    selector = st.one_of(
        st.builds(lambda a: {"matchLabels": {"app": a}}, apps),
        st.builds(
            lambda op, vs: {"matchExpressions": [{"key": "app", "operator": op, "values": vs}]},
            st.sampled_from(["In", "NotIn"]),
            st.lists(apps, min_size=1, max_size=2, unique=True),
        ),
        st.builds(lambda t: {"matchLabels": {"team": t}}, st.sampled_from(["x", "y"])),
        st.just({"matchExpressions": [{"key": "team", "operator": "Exists"}]}),
    )
    term = st.builds(
        lambda sel, key, ns: {"labelSelector": sel, "topologyKey": key, **ns},
        selector,
        st.sampled_from([ZONE, ZONE, HOST]),
        namespace_parts,
    )
    pod_affinity = st.tuples(
        _maybe(term, 1, 2 if rich else 4 if pending else 5),
        _maybe(
            st.builds(lambda w, t: {"weight": w, "podAffinityTerm": t}, st.integers(1, 100), term), 2, 1 if rich else 3
        ),
    )
    parts = {
        "namespace": st.sampled_from(["default", "default", "other"]),
        "team": st.sampled_from([None, "x", "y"]),
        "requests": st.tuples(
            st.sampled_from([None, "100m", "500m", "1", "2"]), st.sampled_from([None, "256Mi", "1Gi", "2Gi"])
        ),
        "image": st.sampled_from(["nginx:1.0", "redis", "busybox", "x:1"]),
        "port": st.sampled_from([None] * 5 + [8080, 9090]).flatmap(
            lambda port: (
                st.none()
                if port is None
                else (
                    st.sampled_from([{}, {"protocol": "UDP"}, {"hostIP": "127.0.0.1"}]).map(
                        lambda extra: {"containerPort": 80, "hostPort": port, **extra}
                    )
                )
            )
        ),
        "podAffinity": pod_affinity,
        "podAntiAffinity": pod_affinity,
    }
    if pending:
        parts["nodeSelector"] = st.sampled_from([{}] * 4 + [{ZONE: "z1"}, {"disk": "ssd"}, {ZONE: "z2", "disk": "hdd"}])
        parts["tolerations"] = _maybe(tolerations, 2, 2)
        parts["nodeAffinity"] = st.tuples(
            _maybe(node_terms, 2, 5),
            _maybe(st.builds(lambda w, t: {"weight": w, "preference": t}, st.integers(1, 100), node_terms), 2, 2),
        )
        parts["spread"] = _maybe(
            st.builds(
                lambda skew, key, when, a, extra: {
                    "maxSkew": skew,
                    "topologyKey": key,
                    "whenUnsatisfiable": when,
                    "labelSelector": {"matchLabels": {"app": a}},
                    **extra,
                },
                st.integers(1, 2),
                st.sampled_from([ZONE, HOST]),
                st.sampled_from(["DoNotSchedule", "ScheduleAnyway"]),
                apps,
                st.sampled_from(
                    [
                        {},
                        {},
                        {"minDomains": 3},
                        {"nodeTaintsPolicy": "Honor"},
                        {"nodeAffinityPolicy": "Ignore"},
                        {"matchLabelKeys": ["team"]},
                    ]
                ),
            ),
            2,
            1 if rich else 2,
        )
    return parts


def assemble(app: str, parts: dict[str, Any]) -> tuple[str, dict[str, Any], dict[str, str]]:
    """(namespace, spec, labels) from drawn parts."""
    labels = {"app": app, **({"team": parts["team"]} if parts["team"] else {})}
    cpu, memory = parts["requests"]
    container: dict[str, Any] = {
        "name": "c",
        "image": parts["image"],
        "resources": {"requests": {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}},
    }
    if parts["port"]:
        container["ports"] = [parts["port"]]
    spec: dict[str, Any] = {"containers": [container], "affinity": {}}
    for kind in ("podAffinity", "podAntiAffinity", "nodeAffinity"):
        required, preferred = parts.get(kind, ([], []))
        section: dict[str, Any] = {}
        if required:
            section["requiredDuringSchedulingIgnoredDuringExecution"] = (
                {"nodeSelectorTerms": required} if kind == "nodeAffinity" else required
            )
        if preferred:
            section["preferredDuringSchedulingIgnoredDuringExecution"] = preferred
        if section:
            spec["affinity"][kind] = section
    spec["nodeSelector"] = parts.get("nodeSelector", {})
    spec["tolerations"] = parts.get("tolerations", [])
    spec["topologySpreadConstraints"] = parts.get("spread", [])
    return parts["namespace"], spec, labels


@st.composite
def pod_parts(draw: Any, pending: bool, apps: tuple[str, ...] = APPS, rich: bool = False) -> tuple[str, dict[str, Any]]:
    app = draw(st.sampled_from(apps))
    parts = {key: draw(strategy) for key, strategy in components(app, pending, rich).items()}
    if not pending and draw(st.integers(0, 2)) < 2:  # mostly plain: placing it moves fewer tokens
        parts["podAffinity"] = parts["podAntiAffinity"] = ([], [])
    return app, parts


@dataclass
class Scenario:
    nodes: list[Node]
    running: list[Pod]
    pending: list[Pod]
    probes: list[Pod]  # one pod of each template: every class is checked at every step
    events: list[list[Any]]  # before each pending pod: ("remove", i), ("run", pod, i), ("add" | "update", i, kw)
    places: list[int]  # which feasible node each pending pod goes to (modulo their number)
    start: int


@st.composite
def scenarios(draw: Any) -> Scenario:
    nodes = [build_node(f"n{i}", draw(node_kwargs())) for i in range(draw(st.integers(3, 12)))]
    running = []
    for i in range(draw(st.integers(0, 15))):
        namespace, spec, labels = assemble(*draw(pod_parts(pending=False)))
        where = nodes[draw(st.integers(0, len(nodes) - 1))].name
        running.append(pod(f"r{i}", namespace, spec, labels, node_name=where))
    # A base template and 1-2 variants differing in one or two parts: near-equal classes.
    app, base = draw(pod_parts(pending=True))
    parts = components(app, pending=True)
    templates = [base]
    for _ in range(draw(st.integers(1, 2))):
        changed = draw(st.lists(st.sampled_from(sorted(parts)), min_size=1, max_size=2, unique=True))
        templates.append({**base, **{key: draw(parts[key]) for key in changed}})
    sequence = draw(st.lists(st.integers(0, len(templates) - 1), min_size=1, max_size=8))
    pending = [pod(f"p{i}", *assemble(app, templates[t])) for i, t in enumerate(sequence)]
    probes = [pod(f"probe{i}", *assemble(app, t)) for i, t in enumerate(templates)]
    probes.append(pod("probe-rich", *assemble(*draw(pod_parts(True, (app, *APPS), rich=True)))))  # never placed
    index = st.integers(0, 99)
    # Pod changes move few version tokens (stale answers would survive); node changes move all.
    event = st.sampled_from(["run", "run", "remove", "remove", "add", "update"]).flatmap(
        lambda kind: st.tuples(
            st.just(kind),
            pod_parts(False, (app, *APPS)).map(lambda ap: assemble(*ap)) if kind == "run" else index,
            index if kind in ("run", "remove") else node_kwargs(),
        )
    )
    events = draw(st.lists(st.lists(event, max_size=2), min_size=len(pending), max_size=len(pending)))
    places = draw(st.lists(st.integers(0, 11), min_size=len(pending), max_size=len(pending)))
    return Scenario(nodes, running, pending, probes, events, places, draw(st.integers(0, 99)))


def apply_events(state: ClusterStore, events: list[Any], step: int) -> None:
    for number, (kind, a, b) in enumerate(events):
        keys = sorted(p.key for p in state.pods())
        if kind == "remove" and keys:
            state.remove_pod(keys[a % len(keys)])
        elif kind == "run":
            state.add_pod(pod(f"e{step}-{number}", *a, node_name=state.nodes[b % len(state.nodes)].name))
        elif kind == "add":
            state.add_node(build_node(f"x{step}-{number}", b))
        elif kind == "update":
            state.update_node(build_node(state.nodes[a % len(state.nodes)].name, b))


def reported_reasons(value: Any, name: str) -> tuple[str, ...]:
    """A filter's reasons as ruleset reports them: a string or list, else the default one."""
    value = (value,) if isinstance(value, str) and value else () if value is None or value == "" else value
    return tuple(value) or (f"node(s) didn't satisfy rule {name}",)


# --- replaying a scenario -----------------------------------------------------------------------


class AlwaysBind:
    def bind(self, binding: Binding) -> bool:
        return True


def schedule(
    scenario: Scenario, state: ClusterStore, settings_: SchedulerSettings, rules: RuleSet | None = None
) -> Iterator[CycleResult]:
    """Run the real Scheduler over the scenario's pending pods, the scenario's events applied
    between cycles and virtual time jumped over backoffs; yields each cycle's result."""
    clock = VirtualClock()
    scheduler = Scheduler(rules or default_rules(), state, settings_, AlwaysBind(), clock=clock)
    for p in scenario.pending:
        scheduler.add(p)
    for step in range(3 * len(scenario.pending)):
        if step < len(scenario.events):
            apply_events(state, scenario.events[step], step)
        result = scheduler.schedule_one()
        if result is None:
            ready = scheduler.queue.next_ready_time()
            if ready is None:
                break
            clock.now = max(clock.now, ready)
            continue
        yield result


def replay_walks(scenario: Any, walks: Any, columns_from: int, chunk: int = 0) -> None:
    """Schedules the scenario's pods one by one (its events in between); before each, every
    probe's and the pod's class table (kept per binding, one ColumnStore for all) is walked and
    checked against the node-by-node walk (:func:`check_walks`)."""
    rules = default_rules()
    state = ClusterStore.build(scenario.nodes, scenario.running, namespaces=NAMESPACES)
    store = ColumnStore()
    tables: dict[int, NodeTable] = {}
    for i, (p, event) in enumerate(zip(scenario.pending, scenario.events, strict=True)):
        apply_events(state, event, i)
        snapshot = state.snapshot()
        for q in (*scenario.probes, p):
            bound = rules.bind(q, snapshot)
            if not bound.cached or not snapshot.nodes:
                continue
            table = tables.get(id(bound))
            if table is None or table.bound is not bound:
                table = tables[id(bound)] = NodeTable(bound, store, columns_from, chunk)
            table.sync(snapshot)
            check_walks(table, bound, snapshot.nodes, walks, (q.key, i))
        feasible, _ = rules.bind(p, state).feasible(state.nodes, 0, len(state.nodes))
        if feasible:
            target = feasible[scenario.places[i] % len(feasible)]
            state.finish_binding(state.assume(p, target.name).key)


def check_walks(table: Any, bound: Any, nodes: Any, walks: Any, where: object) -> None:
    """Each walk of the table finds the nodes, looks as far and scores them as the bound rules
    node by node do."""
    for start, wanted in walks:
        start %= len(nodes)
        rows, looked = table.feasible(start, wanted)
        expected, expected_looked = bound.feasible(nodes, start, wanted)
        assert [table.node(r).name for r in rows.tolist()] == [n.name for n in expected], where
        assert looked == expected_looked, where
        if len(rows):
            bound.ctx.feasible = expected
            assert [tuple(v) for v in table.vectors(rows).tolist()] == [bound.score_vector(n) for n in expected], where
