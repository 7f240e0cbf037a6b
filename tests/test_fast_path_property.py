"""Property: the fast path and the reference interpreter agree on generated clusters (default rules).

The fast path is what :meth:`RuleSet.bind` adds to plain evaluation: compiled closures with
pod-only parts hoisted, one binding per equivalence class of pods, per-node memos of filter
outcomes and score vectors stamped with cluster version tokens. The reference is
:class:`rulesched.lang.evaluation.interp.Interpreter` with a fresh :class:`EvalContext` over a
:class:`ClusterStore` rebuilt from the objects (so stale incremental aggregates would show too).

Pending pods come from a template and 1-2 variants of it (near-equal classes, several pods per
class); each is placed on a drawn feasible node. Between pods, running pods come and go and nodes
are added or replaced. At every step one pod of every template, and a never-placed pod rich in
pod (anti-)affinity and spreading, are checked too: a stale memo entry, a version token that
does not move, or a class key missing a field shows up as a disagreement. A second property
runs the real :class:`Scheduler` and checks every outcome against the reference.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rulesched.cluster.store import ClusterStore
from rulesched.lang import RuleSet
from rulesched.lang.context import EvalContext
from rulesched.lang.evaluation.interp import Interpreter
from rulesched.lang.frontend import ast
from rulesched.lang.values import as_score
from rulesched.model import Node, Pod
from rulesched.scheduler.framework import Code, CycleResult, SchedulerSettings
from rulesched.scheduler.scheduler import Scheduler
from rulesched.scheduler.scoring import normalize
from rulesched.simulate.driver import VirtualClock
from tests.upstream.harness import default_rules, node, pod

ZONE, HOST = "topology.kubernetes.io/zone", "kubernetes.io/hostname"
ZONES, APPS = ("z1", "z2", "z3"), ("web", "db", "cache")
NAMESPACES = {"default": {"env": "prod"}, "other": {"env": "dev"}}
MB = 1024 * 1024
IMAGES = (("nginx:1.0",), ("redis:latest", "docker.io/library/redis:latest"), ("busybox:latest",))
SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
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


# --- the reference --------------------------------------------------------------------------------


def _reasons(value: Any, name: str) -> tuple[str, ...]:
    """A filter's reasons as ruleset reports them: a string or list, else the default one."""
    value = (value,) if isinstance(value, str) and value else () if value is None or value == "" else value
    return tuple(value) or (f"node(s) didn't satisfy rule {name}",)


@dataclass
class Outcome:
    # infeasible node -> (filter, reasons, whether unresolvable)
    failures: dict[str, tuple[str, tuple[str, ...], bool]]
    feasible: list[str]
    scores: list[tuple[str, int, str]]  # applicable score rules: name, weight, normalize
    raw: dict[str, dict[str, int]]  # rule -> node -> raw score
    normalized: dict[str, dict[str, int]]

    def totals(self) -> dict[str, int]:
        return {n: sum(w * self.normalized[r][n] for r, w, _ in self.scores) for n in self.feasible}


def reference(p: Pod, nodes: list[Node], pods: list[Pod]) -> Outcome:
    """The interpreter, a fresh context, and a cluster rebuilt from the objects alone."""
    checked = default_rules().checked
    interp = Interpreter(checked.notes, checked.lets)
    cluster = ClusterStore.build(nodes, pods, namespaces=NAMESPACES)
    ctx = EvalContext(p, cluster)
    rules = [r for r in checked.rules if interp.applies(r, ctx)]
    failures, feasible = {}, []
    for info in cluster.nodes:
        for r in rules:
            if r.kind is ast.RuleKind.FILTER and not interp.body(r, ctx, info):
                reasons = _reasons(interp.reason(r, ctx, info), r.name)
                failures[info.name] = (r.name, reasons, interp.unresolvable(r, ctx, info))
                break
        else:
            feasible.append(info)
    ctx.feasible = feasible
    scores = [r for r in rules if r.kind is ast.RuleKind.SCORE]
    names = [n.name for n in feasible]
    raw = {r.name: {n.name: as_score(interp.body(r, ctx, n)) for n in feasible} for r in scores}
    normalized = {
        r.name: dict(zip(names, normalize(r.normalize, [raw[r.name][n] for n in names]), strict=True)) for r in scores
    }
    return Outcome(failures, names, [(r.name, r.weight, r.normalize) for r in scores], raw, normalized)


# --- the fast path --------------------------------------------------------------------------------


def fast_path(p: Pod, state: ClusterStore, start: int, walk_first: bool) -> Outcome:
    """Per node and through the scheduler's batch calls (in drawn order: the second hits memos)."""
    bound = default_rules().bind(p, state)
    nodes = state.nodes
    walked: dict[str, tuple[str, ...]] = {}

    def walk() -> list[str]:
        found, looked = bound.feasible(
            nodes, start % len(nodes), len(nodes), lambda n, failure: walked.__setitem__(n.name, failure[1])
        )
        assert looked == len(nodes)
        return [n.name for n in found]

    via_walk = walk() if walk_first else []
    outcomes = {n.name: bound.first_failure(n) for n in nodes}
    if not walk_first:
        via_walk = walk()
    failures = {n.name: (f.name, why, f.unresolvable(n)) for n in nodes if (o := outcomes[n.name]) for f, why in [o]}
    feasible = [n for n in nodes if outcomes[n.name] is None]
    assert sorted(via_walk) == sorted(n.name for n in feasible)
    assert walked == {name: why for name, (_, why, _) in failures.items()}
    bound.ctx.feasible = feasible
    batch = bound.score_vectors(feasible) if walk_first else None
    vectors = [bound.score_vector(n) for n in feasible]
    assert vectors == (batch if batch is not None else bound.score_vectors(feasible))
    for vector in vectors:  # the last element: the weighted sum of the rules not normalised
        assert vector[-1] == sum(
            s.weight * v for s, v in zip(bound.scores, vector, strict=False) if s.normalize == "none"
        )
    names = [n.name for n in feasible]
    raw = {s.name: {n: v[i] for n, v in zip(names, vectors, strict=True)} for i, s in enumerate(bound.scores)}
    normalized = {
        s.name: dict(zip(names, normalize(s.normalize, [raw[s.name][n] for n in names]), strict=True))
        for s in bound.scores
    }
    return Outcome(failures, names, [(s.name, s.weight, s.normalize) for s in bound.scores], raw, normalized)


def snapshot(state: ClusterStore, without: str = "") -> tuple[list[Node], list[Pod]]:
    return [n.node for n in state.nodes], [p for p in state.pods() if p.key != without]


# --- properties -----------------------------------------------------------------------------------


@SETTINGS
@given(scenarios(), st.booleans())
def test_fast_path_agrees_with_the_interpreter(scenario: Scenario, walk_first: bool) -> None:
    state = ClusterStore.build(scenario.nodes, scenario.running, namespaces=NAMESPACES)
    for i, (p, event) in enumerate(zip(scenario.pending, scenario.events, strict=True)):
        apply_events(state, event, i)
        for q in (*scenario.probes, p):  # the pending pod last: its outcome places it
            fast = fast_path(q, state, scenario.start + i, walk_first)
            assert fast == reference(q, *snapshot(state)), (q.key, i)  # feasible, reasons, scores
        if fast.feasible:  # the next pod of the class reuses the binding over a changed cluster
            target = fast.feasible[scenario.places[i] % len(fast.feasible)]
            state.finish_binding(state.assume(p, target).key)


class AlwaysBind:
    def bind(self, pod: Pod, node: str) -> bool:
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


@SETTINGS
@given(scenarios(), st.integers(0, 2**16), st.sampled_from(["explain", "tables", "columns"]))
def test_scheduler_places_pods_where_the_interpreter_would(scenario: Scenario, seed: int, mode: str) -> None:
    """Each cycle (all nodes scored) against the reference without the pod: an unschedulable pod
    fits nowhere; a placed one passes every filter and has the highest total. With ``explain`` the
    cycle's per-node reasons and normalised scores must be the reference's, too. Without, the
    cycle walks node tables, their stale rows evaluated node by node or (``columns``) as columns."""
    state = ClusterStore.build(scenario.nodes, scenario.running, namespaces=NAMESPACES)
    explain = mode == "explain"
    settings_ = SchedulerSettings(
        percentage_of_nodes_to_score=100, seed=seed, explain=explain, columns_from=1 if mode == "columns" else 0
    )
    for result in schedule(scenario, state, settings_):
        key = result.pod.key
        ref = reference(result.pod, *snapshot(state, without=key))
        totals = ref.totals()
        if explain:
            assert result.filtered == {n: why for n, (_, why, _) in ref.failures.items()}, key
            assert result.unresolvable == {n for n, (_, _, unresolvable) in ref.failures.items() if unresolvable}, key
            assert result.scores == {
                n: {**{r: ref.normalized[r][n] for r, _, _ in ref.scores}, "total": total}
                for n, total in totals.items()
            }, key
        if result.code is not Code.SCHEDULED:
            assert result.code is Code.UNSCHEDULABLE and ref.feasible == [], (key, ref.feasible)
            assert result.preemption is None or result.preemption.nominated is None
            continue
        assert state.pod_node(key) == result.node
        assert result.node in ref.feasible, (key, result.node, ref.failures.get(result.node or ""))
        assert totals[result.node] == max(totals.values()), (key, result.node, totals)
