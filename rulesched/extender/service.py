"""The extender's verbs over the rules: filter, prioritize, preempt, bind.

One :class:`Extender` owns a :class:`ClusterStore` and is used from one thread (the server runs
every request on the same worker), so it needs no locks and its caches carry over from request
to request: the rules' per-class bindings and per-node answers, the node tables of recent pod
classes (:class:`rulesched.scheduler.table.NodeTable`, as a scheduling cycle uses), and decoded
nodes by their bytes.

Where nodes come from:

* names only (kube-scheduler's ``nodeCacheCapable: true``): the store, which the informer cache
  (:mod:`rulesched.mirror`) keeps; a name the cache does not know fails with that reason;
* full Node objects (``nodeCacheCapable: false``): the nodes as given, written into the store
  (a node whose resourceVersion the store already holds is left alone). Pods come from the
  informer cache when one is configured, else there are none: the request alone. Without a cache,
  nodes not seen in any request for ``node_ttl`` seconds are dropped.

Answers follow kube-scheduler's reading of them:

* filter: the passing nodes; every other node in ``FailedNodes`` with its first failing
  filter's reasons. (No rule can yet say "preemption cannot help", so
  ``FailedAndUnresolvableNodes`` stays empty.)
* prioritize: the weighted totals of the score rules, normalised over the nodes given as a
  cycle normalises over the feasible nodes, then mapped onto 0..10 by :func:`priority_levels`.
* preempt: for each proposed node, the proposed victims the preempt rules allow, as few of them
  as still let the pod fit (reprieved as kube-scheduler reprieves); a node where the pod does
  not fit even then, or whose victims are unknown, is dropped.
* bind: a Binding through the API server.
Next stage: :mod:`rulesched.extender.wire` encodes the answer.
"""

from __future__ import annotations

import dataclasses
import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import cachetools
import numpy as np

from rulesched.cluster.snapshot import ClusterOverlay, Snapshot
from rulesched.cluster.store import ClusterStore
from rulesched.errors import InputError, KubeError
from rulesched.extender.wire import (
    MAX_EXTENDER_PRIORITY,
    BindingArgs,
    ExtenderArgs,
    NodeCache,
    PreemptionArgs,
    Victims,
    WireError,
    binding_result,
    decode_args,
    decode_binding_args,
    decode_preemption_args,
    filter_result,
    host_priorities,
    preemption_result,
)
from rulesched.kube.api import KubeApi
from rulesched.kube.informer import Delta
from rulesched.lang import BoundRules, RulesHandle
from rulesched.lang.builtins.indexes import ForkedIndexes
from rulesched.mirror import Mirror
from rulesched.model import Node, Pod
from rulesched.scheduler.evaluate import score_nodes
from rulesched.scheduler.preemption import importance, select_victims
from rulesched.scheduler.scoring import Matrix, weighted_totals
from rulesched.scheduler.table import ColumnStore, NodeTable, TableOverflow

log = logging.getLogger(__name__)

TABLES = 64  # pod classes whose node tables are kept
NOT_CACHED = "node is not in rulesched's informer cache"


def priority_levels(totals: Sequence[int]) -> list[int]:
    """Totals onto MinExtenderPriority..MaxExtenderPriority (0..10), order kept as far as 11
    levels allow: with at most 11 distinct totals each gets its own level, spread evenly from 0
    (the lowest) to 10 (the highest); with more, the distinct totals are cut into 11 groups of
    (nearly) equal count. Equal totals always get equal levels; a single distinct total is 10."""
    distinct = sorted(set(totals))
    d = len(distinct)
    if d <= 1:
        return [MAX_EXTENDER_PRIORITY] * len(totals)
    if d <= MAX_EXTENDER_PRIORITY + 1:
        rank = {v: round(i * MAX_EXTENDER_PRIORITY / (d - 1)) for i, v in enumerate(distinct)}
    else:
        rank = {v: i * (MAX_EXTENDER_PRIORITY + 1) // d for i, v in enumerate(distinct)}
    return [rank[t] for t in totals]


@dataclass(frozen=True)
class Answer:
    """An HTTP answer: status and JSON body."""

    status: int
    body: bytes


class Extender:
    def __init__(
        self,
        rules: RulesHandle,
        api: KubeApi | None = None,
        stop: threading.Event | None = None,
        node_ttl: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rules = rules
        self.api = api
        self.store = ClusterStore(assumed_ttl=None)
        self.stop = stop or threading.Event()
        self._inbox: queue.SimpleQueue[Delta] = queue.SimpleQueue()
        self.mirror = Mirror(api, self.store, self._inbox.put, self.stop) if api is not None else None
        self.node_ttl, self.clock = node_ttl, clock
        self._nodes = NodeCache()
        self._seen: dict[str, float] = {}  # without a cache: node name -> last request naming it
        self._last_sweep = clock()
        self._tables: cachetools.LRUCache[BoundRules, NodeTable] = cachetools.LRUCache(TABLES)
        self._columns = ColumnStore()
        self._rules_of_tables: object = None

    @property
    def ready(self) -> tuple[bool, str]:
        if self.mirror is not None and not self.mirror.synced:
            return False, f"caches not synced ({', '.join(self.mirror.waiting())})"
        return True, f"rules {self.rules.digest}"

    def start(self) -> None:
        if self.mirror is not None:
            self.mirror.start()

    def close(self) -> None:
        self.stop.set()
        if self.mirror is not None:
            self.mirror.join(timeout=1.0)

    # --- the cache ---------------------------------------------------------------------------
    def sync(self) -> None:
        """Apply what the informers delivered since the last request."""
        while True:
            try:
                delta = self._inbox.get_nowait()
            except queue.Empty:
                break
            assert self.mirror is not None
            try:
                self.mirror.apply(delta, any_waiting_on_pods=False)
            except InputError as err:
                log.warning("skipping %s %s: %s", delta.kind, delta.key, err)
        if self.mirror is None and self.clock() - self._last_sweep > self.node_ttl / 10:
            self._sweep()

    def _sweep(self) -> None:
        now = self._last_sweep = self.clock()
        for name in [n for n, seen in self._seen.items() if now - seen > self.node_ttl]:
            del self._seen[name]
            self.store.remove_node(name)

    def _admit(self, nodes: Sequence[Node]) -> None:
        """Nodes as a request gives them, into the store (unless it has this version)."""
        store, now = self.store, self.clock()
        for node in nodes:
            info = store.node_view(node.name)
            held = info.node if info is not None else None
            if held is not node and not (held is not None and _same_version(held, node)):
                store.add_node(node)
            if self.mirror is None:
                self._seen[node.name] = now

    def _table(self, bound: BoundRules, snapshot: Snapshot) -> NodeTable:
        rules = self.rules.rules
        if rules is not self._rules_of_tables:  # a reload: the old set's tables go with it
            self._rules_of_tables = rules
            self._tables.clear()
        table = self._tables.get(bound) if bound.cached else None
        if table is None:
            table = NodeTable(bound, self._columns, 64)
            if bound.cached:
                self._tables[bound] = table
        table.sync(snapshot)
        return table

    def _args(self, body: bytes) -> ExtenderArgs:
        args = decode_args(body, self._nodes, self.mirror.classes if self.mirror is not None else {})
        if args.nodes is not None:
            self._admit(args.nodes)
        elif self.mirror is None:
            raise WireError("NodeNames: node names need the informer cache (--kubeconfig or --in-cluster)")
        return args

    # --- verbs -------------------------------------------------------------------------------
    def filter(self, body: bytes) -> Answer:
        self.sync()
        args = self._args(body)
        names = [n.name for n in args.nodes] if args.nodes is not None else list(args.names or ())
        snapshot = self.store.snapshot()
        bound = self.rules.rules.session().bind(args.pod, snapshot)
        table = self._table(bound, snapshot)
        try:
            rows, missing = table.rows_of(names)
            passing = table.passing(rows)
            failed = {name: NOT_CACHED for name in missing}
            if len(passing) != len(rows):
                ok = np.zeros(len(snapshot.nodes), dtype=bool)
                ok[passing] = True
                for i in rows[~ok[rows]].tolist():
                    node = table.node(i)
                    failure = bound.first_failure(node)
                    failed[node.name] = ", ".join(failure[1]) if failure is not None else "filtered"
            passing_names = [table.node(i).name for i in passing.tolist()]
        finally:
            table.release()
        log.debug("filter: %d of %d nodes pass", len(passing_names), len(names), extra={"pod": args.pod.key})
        if args.nodes is None:
            return Answer(200, filter_result(passing_names, failed, {}))
        keep = set(passing_names)
        raw = [r for r, node in zip(args.raw_nodes, args.nodes, strict=True) if node.name in keep]
        return Answer(200, filter_result(None, failed, {}, raw))

    def prioritize(self, body: bytes) -> Answer:
        self.sync()
        args = self._args(body)
        names = [n.name for n in args.nodes] if args.nodes is not None else list(args.names or ())
        snapshot = self.store.snapshot()
        bound = self.rules.rules.session().bind(args.pod, snapshot)
        table = self._table(bound, snapshot)
        try:
            rows, missing = table.rows_of(names)
            totals: Matrix | list[int]
            if not len(rows) or not bound.scores:
                totals = [0] * len(rows)
            else:
                try:
                    totals = weighted_totals(bound.scores, table.vectors(rows))
                except TableOverflow:
                    totals = score_nodes(bound, [table.node(i) for i in rows.tolist()]).totals
            scored = [table.node(i).name for i in rows.tolist()]
        finally:
            table.release()
        levels = priority_levels([int(t) for t in totals])
        answer = list(zip(scored, levels, strict=True)) + [(name, 0) for name in missing]
        return Answer(200, host_priorities(answer))

    def preempt(self, body: bytes) -> Answer:
        self.sync()
        args = decode_preemption_args(body, self.mirror.classes if self.mirror is not None else {})
        return Answer(200, preemption_result(self._preempt(args)))

    def _preempt(self, args: PreemptionArgs) -> dict[str, tuple[list[str], int]]:
        snapshot = self.store.snapshot()
        overlay = ClusterOverlay(snapshot)
        session = self.rules.rules.session()
        bound = session.bind_private(args.pod, overlay, ForkedIndexes(session.indexes, snapshot))
        out: dict[str, tuple[list[str], int]] = {}
        if not bound.preempts:
            return out  # preemptionPolicy Never, or no rule lets this pod preempt
        for name, proposal in args.victims.items():
            chosen = self._victims_on(overlay, bound, args.pod, name, proposal)
            if chosen is not None:
                out[name] = chosen
        return out

    def _victims_on(
        self, overlay: ClusterOverlay, bound: BoundRules, pod: Pod, name: str, proposal: Victims
    ) -> tuple[list[str], int] | None:
        info = overlay.node_view(name)
        if info is None:
            log.info("preempt: node unknown, dropped", extra={"pod": pod.key, "node": name})
            return None
        on_node = {p.uid: p for p in info.pods if p.uid}
        proposed: list[Pod] = []
        for i, uid in enumerate(proposal.uids):
            victim = on_node.get(uid)
            if victim is None and proposal.pods is not None:
                victim = proposal.pods[i]
                overlay.add_pod(victim if victim.node_name == name else _on(victim, name))
            if victim is None:
                log.info("preempt: victim %s not in the cache, node dropped", uid, extra={"pod": pod.key, "node": name})
                return None
            proposed.append(victim)
        node = overlay.node_view(name)
        assert node is not None
        allowed = [v for v in proposed if all(rule.allows(node, v) for rule in bound.preempts)]
        candidate = select_victims(overlay, bound, name, sorted(allowed, key=importance))
        if candidate is None:
            return None
        uids = [v.uid for v in candidate.victims]
        violations = candidate.pdb_violations
        if self.mirror is None and set(uids) == set(proposal.uids):
            violations = proposal.pdb_violations  # no budgets known here: kube-scheduler's count stands
        return uids, violations

    def bind(self, body: bytes) -> Answer:
        args: BindingArgs = decode_binding_args(body)
        if self.api is None:
            return Answer(200, binding_result("rulesched extender has no API access (--kubeconfig or --in-cluster)"))
        try:
            self.api.bind(args.pod_namespace, args.pod_name, args.pod_uid, args.node)
        except KubeError as err:
            log.warning(
                "bind failed: %s", err, extra={"pod": f"{args.pod_namespace}/{args.pod_name}", "node": args.node}
            )
            return Answer(200, binding_result(str(err)))
        log.info("bound", extra={"pod": f"{args.pod_namespace}/{args.pod_name}", "node": args.node})
        return Answer(200, binding_result())


def _same_version(a: Node, b: Node) -> bool:
    return bool(a.resource_version) and (a.resource_version, a.uid) == (b.resource_version, b.uid)


def _on(pod: Pod, node: str) -> Pod:
    return dataclasses.replace(pod, node_name=node)
