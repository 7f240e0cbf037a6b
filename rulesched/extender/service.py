"""The extender's verbs over the rules: filter, prioritize, preempt, bind.

One :class:`Extender` owns a :class:`ClusterStore` and is used from one thread (the server runs
every request on the same worker), so it needs no locks and its caches carry over from request
to request: the rules' per-class bindings and per-node answers, decoded nodes by their bytes,
and its :class:`rulesched.scheduler.runtime.Framework` (the node tables of recent pod classes, as
a scheduling cycle's, dropped when the rules handle says the rules changed), whose verbs answer
filter, prioritize and preempt's dry runs. A request's evaluation stops at its first check past the server's timeout
(:meth:`Extender.answer`), as a scheduling cycle past its deadline, so it never holds the thread
long after kube-scheduler was answered 503.

Where nodes come from:

* names only (kube-scheduler's ``nodeCacheCapable: true``): the store, which the informer cache
  (:mod:`rulesched.mirror`) keeps; a name the cache does not know fails with that reason;
* full Node objects (``nodeCacheCapable: false``): the nodes as given, written into the store
  (a node whose resourceVersion the store already holds is left alone). Pods come from the
  informer cache when one is configured, else there are none: the request alone. A node a
  request sent (and the informer does not list) is dropped once no request has sent it for
  ``node_ttl`` seconds, or once the decoded-node cache (bounded in bytes) lets it go: what
  requests can make the extender hold is bounded by ``node_cache_bytes``.

Devices are kube-scheduler's: its DynamicResources plugin filtered the nodes for the pod's claims
and allocates them itself, so the rules see the pod without its claims
(:mod:`rulesched.extender.wire`). Of DRA's objects the informer cache holds only the
DeviceClasses, so that an extended resource a class serves (KEP-5004) is not counted against the
allocatable of a node that lacks it (kube-scheduler gives devices there); a device plugin's
nodes are checked as NodeResourcesFit checks them.

Answers follow kube-scheduler's reading of them:

* filter: the passing nodes; every other node with its first failing filter's reasons, in
  ``FailedAndUnresolvableNodes`` when that filter's ``unresolvable`` clause holds there
  (kube-scheduler then does not try preemption on it), else in ``FailedNodes``.
* prioritize: the weighted totals of the score rules, normalised over the nodes given as a
  cycle normalises over the feasible nodes, then mapped onto 0..10 by :func:`priority_levels`.
* preempt: kube-scheduler proposes, per node, the victims its own profile needs gone (it has
  already reprieved every pod it could). The answer keeps a node with exactly those victims, or
  drops it: when a ``preempt`` rule forbids evicting one of them, when the pod would still fail
  the rules' filters there with all of them gone, or when its victims are unknown. Victims are
  never reprieved here: the rules cannot see the grounds kube-scheduler had for each (a rule set
  that does not ``extends "default"`` checks no resources at all), and kube-scheduler rejects a
  node answered with no victims ("expected at least one victim pod on node").
* bind (:mod:`.binding`): off unless configured; for a pod pending in the informer cache, of a
  scheduler this extender serves, on a node the cache has: the pod's volume choices, then a
  Binding through the API server; a failed binding takes the choices back.
Next stage: :mod:`rulesched.extender.wire` encodes the answer.
"""

from __future__ import annotations

import dataclasses
import gc
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
from rulesched.engine import EngineSettings, Rows
from rulesched.errors import InputError
from rulesched.extender.binding import BindSettings, refusal
from rulesched.extender.binding import bind as bind_pod
from rulesched.extender.wire import (
    MAX_EXTENDER_PRIORITY,
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
from rulesched.lang import BoundRules, ForkedIndexes, RuleSet, RulesHandle, RuleWatch, Session
from rulesched.logs import VERBOSE
from rulesched.mirror import FOR_EXTENDER, Mirror
from rulesched.model import Node, Pod
from rulesched.scheduler.cancel import Cancellation, CycleCancelled
from rulesched.scheduler.reasons import Tally
from rulesched.scheduler.runtime import Framework
from rulesched.scheduler.scoring import Matrix

log = logging.getLogger(__name__)

FREEZE_AFTER = 1000  # deltas applied at once
NOT_CACHED = "node is not in rulesched's informer cache"
CHUNK = 448  # nodes a filter evaluates between two checks of the request's deadline (as `run`'s walk)


def priority_levels(totals: Sequence[int] | Matrix) -> list[int]:
    """Totals onto MinExtenderPriority..MaxExtenderPriority (0..10), order kept as far as 11
    levels allow: with at most 11 distinct totals each gets its own level, spread evenly from 0
    (the lowest) to 10 (the highest); with more, the distinct totals are cut into 11 groups of
    (nearly) equal count. Equal totals always get equal levels; a single distinct total is 10."""
    if not len(totals):
        return []
    distinct, rank = np.unique(np.asarray(totals), return_inverse=True)
    d = len(distinct)
    if d == 1:
        return [MAX_EXTENDER_PRIORITY] * len(totals)
    if d <= MAX_EXTENDER_PRIORITY + 1:
        levels = np.rint(np.arange(d) * MAX_EXTENDER_PRIORITY / (d - 1)).astype(np.int64)
    else:
        levels = np.arange(d, dtype=np.int64) * (MAX_EXTENDER_PRIORITY + 1) // d
    out: list[int] = levels[rank.reshape(-1)].tolist()
    return out


class NodeIndex:
    """Rows of the snapshot's nodes by name, for one node list (a node change makes a new one),
    and the rows of whole NodeNames lists by their bytes: kube-scheduler names the same nodes,
    in the same order, request after request."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.key = (snapshot.history, snapshot.node_generation)
        self.row = {node.name: i for i, node in enumerate(snapshot.nodes)}
        self.names = np.array([node.name for node in snapshot.nodes], dtype=object)
        self._lists: cachetools.LRUCache[bytes, tuple[Rows, list[int], list[str]]] = cachetools.LRUCache(16)

    def rows(self, names: Sequence[str], raw: bytes = b"") -> tuple[Rows, list[int], list[str]]:
        """The rows of the nodes named, the positions in ``names`` of those found, and the
        names that are no node."""
        hit = self._lists.get(raw) if raw else None
        if hit is not None:
            return hit
        row, found, positions, missing = self.row, list[int](), list[int](), list[str]()
        for position, name in enumerate(names):
            i = row.get(name)
            if i is None:
                missing.append(name)
            else:
                found.append(i)
                positions.append(position)
        out = (np.array(found, dtype=np.intp), positions, missing)
        if raw:
            self._lists[raw] = out
        return out


@dataclass(frozen=True)
class _Request:
    args: ExtenderArgs
    names: list[str]
    snapshot: Snapshot
    rules: RuleSet
    bound: BoundRules
    index: NodeIndex
    rows: Rows
    positions: list[int]
    missing: list[str]


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
        binding: BindSettings | None = None,
        node_cache_bytes: int = 128 * 2**20,
    ) -> None:
        self.rules = rules
        self.binding = binding or BindSettings()
        self.api = api
        self.store = ClusterStore(assumed_ttl=None)
        self.store.dra.allocates = False  # kube-scheduler allocates devices; DeviceClasses only are watched
        self.stop = stop or threading.Event()
        self._inbox: queue.SimpleQueue[Delta] = queue.SimpleQueue()
        self.mirror = Mirror(api, self.store, self._inbox.put, self.stop, FOR_EXTENDER) if api is not None else None
        self.node_ttl, self.clock = node_ttl, clock
        self._nodes = NodeCache(node_cache_bytes, on_evict=self._forget)
        self._seen: dict[str, float] = {}  # node name -> the last request that sent the node
        self._last_sweep = clock()
        # The engine's budgets, the cycle's but for columns_from: 64 (the extender's own tuning,
        # kept: its p99 is measured apart) and its walk steps of CHUNK nodes.
        self.framework = Framework(EngineSettings(columns_from=64, walk_chunk=CHUNK))
        self.framework.follow(rules)
        self._index: NodeIndex | None = None
        # The informer cache's pending pods by key and node names, for the bind verb's checks (the
        # store holds bound pods only, and in full-node mode also nodes that requests sent).
        self._pending: dict[str, Pod] = {}
        self._listed_nodes: set[str] = set()
        # The request under way: its deadline, and the watch of the session evaluating it.
        self.cancel = Cancellation()
        self._watch: RuleWatch | None = None
        self._pod = ""

    def answer(self, verb: Callable[[bytes], Answer], body: bytes, arrived: float, timeout: float) -> Answer:
        """``verb(body)``, given up once ``timeout`` seconds have passed since ``arrived`` (a
        time.monotonic() time): its evaluation stops at the next check (as a scheduling cycle's,
        :mod:`rulesched.scheduler.cancel`) and :class:`CycleCancelled` is raised, its ``rule`` the
        rule then being evaluated; a request that waited that long for the worker is not started.
        So a request the server already answered 503 holds the worker no longer than that."""
        self.cancel.limit(timeout, since=arrived)
        self._pod = ""
        try:
            self.cancel.check()
            return verb(body)
        except CycleCancelled as cancelled:
            cancelled.rule = self._watch.rule if self._watch is not None else ""
            log.warning(
                "request given up after %gs",
                timeout,
                extra={"pod": self._pod or None, "rule": cancelled.rule or None, "rules": self.rules.digest},
            )
            raise
        finally:
            self.cancel.limit(None)
            if self._watch is not None:
                self._watch.disarm()
                self._watch = None

    def _session(self, rules: RuleSet, pod: Pod) -> Session:
        """This thread's session with ``rules``, its watch armed with the request's deadline."""
        session = rules.session()
        session.watch.arm(self.cancel.check)
        self._watch, self._pod = session.watch, pod.key
        return session

    @property
    def ready(self) -> tuple[bool, str]:
        if not self.rules.loaded:
            return False, self.rules.waiting
        if self.mirror is not None and not self.mirror.synced:
            return False, f"caches not synced ({', '.join(self.mirror.waiting())})"
        return True, f"rules {self.rules.digest}"

    def start(self) -> None:
        if self.mirror is not None:
            self.mirror.start()

    def census(self) -> tuple[int, int]:
        """(On the requests' thread.) Apply what the informers delivered; the nodes and the
        pods on them the cache then holds (for the "caches synced" line)."""
        self.sync()
        return len(self.store.nodes), sum(1 for _ in self.store.pods())

    def live_view(self) -> tuple[Snapshot, dict[str, Pod]]:
        """(On the requests' thread, between requests.) For /debug/explain: the current snapshot
        and a copy of the informer cache's pending pods; evaluated elsewhere."""
        self.sync()
        return self.store.snapshot(), dict(self._pending)

    def close(self) -> None:
        self.stop.set()
        if self.mirror is not None:
            self.mirror.join(timeout=1.0)

    # --- the cache ---------------------------------------------------------------------------
    def sync(self) -> None:
        """Apply what the informers delivered since the last request."""
        applied = 0
        while True:
            try:
                delta = self._inbox.get_nowait()
            except queue.Empty:
                break
            assert self.mirror is not None
            applied += 1
            try:
                outcome = self.mirror.apply(delta, any_waiting_on_pods=False)
            except InputError as err:
                log.warning("skipping %s %s: %s", delta.kind, delta.key, err)
                continue
            if outcome.pending is not None:
                self._pending[outcome.pending.key] = outcome.pending
            elif outcome.settled is not None:
                self._pending.pop(outcome.settled, None)
            if delta.kind == "Node":
                (self._listed_nodes.discard if delta.type == "DELETED" else self._listed_nodes.add)(delta.key)
        if applied > FREEZE_AFTER:
            # A large batch (the first lists, a relist) is long-lived: keep the collector from
            # walking it again and again (a full collection over a big cluster costs ~10 ms).
            gc.collect()
            gc.freeze()
        if self._seen and self.clock() - self._last_sweep > self.node_ttl / 10:
            self._sweep()

    # Nodes that requests put in the store (full-node mode) stay there while requests keep
    # sending them, and no longer than their bytes stay in the node cache: so what a client can
    # make the extender hold is bounded by node_cache_bytes. The informer's nodes are its own.
    def _sweep(self) -> None:
        now = self._last_sweep = self.clock()
        for name in [n for n, seen in self._seen.items() if now - seen > self.node_ttl]:
            del self._seen[name]
            if name not in self._listed_nodes:
                self.store.remove_node(name)

    def _forget(self, node: Node) -> None:
        """The node cache let ``node`` go: out of the store too, if a request put it there."""
        if node.name in self._listed_nodes:
            return
        info = self.store.node_view(node.name)
        held = info.node if info is not None else None
        if held is not None and (held is node or _same_version(held, node)):
            self.store.remove_node(node.name)
            self._seen.pop(node.name, None)

    def _admit(self, nodes: Sequence[Node]) -> None:
        """Nodes as a request gives them, into the store (unless it has this version)."""
        store, seen, now = self.store, self._seen, self.clock()
        for node in nodes:
            info = store.node_view(node.name)
            held = info.node if info is not None else None
            if held is not node and not (held is not None and _same_version(held, node)):
                store.add_node(node)
            seen[node.name] = now

    def _node_index(self, snapshot: Snapshot) -> NodeIndex:
        index = self._index
        if index is None or index.key != (snapshot.history, snapshot.node_generation):
            index = self._index = NodeIndex(snapshot)
        return index

    def _args(self, body: bytes) -> ExtenderArgs:
        args = decode_args(body, self._nodes, self.store.priority_classes)
        if args.nodes is not None:
            self._admit(args.nodes)
        elif self.mirror is None:
            raise WireError("NodeNames: node names need the informer cache (--kubeconfig or --in-cluster)")
        return args

    def _request(self, body: bytes) -> _Request:
        """What filter and prioritize start from: the request decoded (nodes admitted), the
        rule set read once (a reload takes effect at the next request), the pod bound to it."""
        self.sync()
        args = self._args(body)
        names = [n.name for n in args.nodes] if args.nodes is not None else args.names or []
        snapshot = self.store.snapshot()
        rules = self.rules.rules
        index = self._node_index(snapshot)
        rows, positions, missing = index.rows(names, args.raw_names)
        bound = self._session(rules, args.pod).bind(args.pod, snapshot)
        return _Request(args, names, snapshot, rules, bound, index, rows, positions, missing)

    # --- verbs -------------------------------------------------------------------------------
    def filter(self, body: bytes) -> Answer:
        r = self._request(body)
        args, names, snapshot, bound, index, rows, missing = (
            r.args,
            r.names,
            r.snapshot,
            r.bound,
            r.index,
            r.rows,
            r.missing,
        )
        verdicts = self.framework.filter(bound, snapshot, rows)
        passing = verdicts.passing
        failed = {name: NOT_CACHED for name in missing}
        unresolvable: dict[str, str] = {}
        tally = Tally()  # the reasons as codes, beside kube-scheduler's fields (which it ignores)
        view, pod = snapshot.node_view, args.pod
        for name, status in verdicts.failed.items():
            (unresolvable if status.unresolvable else failed)[name] = ", ".join(status.reasons)
            tally.add_node(status.rule, status.reasons, pod, view(name), status.unresolvable)
        codes = tally.reasons()
        log.log(
            VERBOSE,
            "filter: %d of %d nodes pass",
            len(passing),
            len(names),
            extra={"pod": args.pod.key, "rules": r.rules.digest},
        )
        if args.nodes is None:
            return Answer(200, filter_result(index.names[passing].tolist(), failed, unresolvable, codes=codes))
        keep = set(index.names[passing].tolist())
        raw = [r for r, node in zip(args.raw_nodes, args.nodes, strict=True) if node.name in keep]
        return Answer(200, filter_result(None, failed, unresolvable, raw, codes=codes))

    def prioritize(self, body: bytes) -> Answer:
        r = self._request(body)
        names, bound, rows, positions, missing = r.names, r.bound, r.rows, r.positions, r.missing
        totals: Matrix | list[int] = [0] * len(rows)
        if len(rows) and bound.scores:
            totals = self.framework.score(bound, r.snapshot, rows).totals
        levels = priority_levels(totals)
        if missing:  # names the cache does not know: the lowest score
            scores = [0] * len(names)
            for position, level in zip(positions, levels, strict=True):
                scores[position] = level
            levels = scores
        if log.isEnabledFor(VERBOSE) and len(levels):
            best = max(range(len(levels)), key=levels.__getitem__)
            extra = {"pod": r.args.pod.key, "node": names[best], "rules": r.rules.digest}
            log.log(VERBOSE, "prioritize: %d nodes, best %d", len(names), levels[best], extra=extra)
        return Answer(200, host_priorities(names, levels))

    def preempt(self, body: bytes) -> Answer:
        self.sync()
        args = decode_preemption_args(body, self.store.priority_classes)
        kept = self._preempt(args)
        log.log(VERBOSE, "preempt: %d of %d nodes kept", len(kept), len(args.victims), extra={"pod": args.pod.key})
        return Answer(200, preemption_result(kept))

    def _preempt(self, args: PreemptionArgs) -> dict[str, tuple[list[str], int]]:
        snapshot = self.store.snapshot()
        overlay = ClusterOverlay(snapshot)
        session = self._session(self.rules.rules, args.pod)
        bound = session.bind_private(args.pod, overlay, ForkedIndexes(session.indexes, snapshot))
        out: dict[str, tuple[list[str], int]] = {}
        if not bound.preempts:
            return out  # preemptionPolicy Never, or no rule lets this pod preempt
        for name, proposal in args.victims.items():
            self.cancel.check()  # (each node's dry runs: the request's deadline checked between them)
            chosen = self._victims_on(overlay, bound, args.pod, name, proposal)
            if chosen is not None:
                out[name] = chosen
        return out

    def _victims_on(
        self, overlay: ClusterOverlay, bound: BoundRules, pod: Pod, name: str, proposal: Victims
    ) -> tuple[list[str], int] | None:
        """kube-scheduler's victims on the node, unchanged, or None: the node is dropped."""
        extra = {"pod": pod.key, "node": name}
        info = overlay.node_view(name)
        if info is None:
            log.log(VERBOSE, "preempt: node unknown, dropped", extra=extra)
            return None
        on_node = {p.uid: p for p in info.pods if p.uid}
        proposed: list[Pod] = []
        for i, uid in enumerate(proposal.uids):
            victim = on_node.get(uid)
            if victim is None and proposal.pods is not None:
                victim = proposal.pods[i]
                overlay.add_pod(victim if victim.node_name == name else _on(victim, name))
            if victim is None:
                log.log(VERBOSE, "preempt: victim %s not in the cache, node dropped", uid, extra=extra)
                return None
            proposed.append(victim)
        if not proposed:  # (kube-scheduler proposes no such node; answering it empty would fail)
            return None
        node = overlay.node_view(name)
        assert node is not None
        for victim in proposed:
            for rule in bound.preempts:
                if not rule.allows(node, victim):
                    log.info(
                        "preempt: rule %s protects victim %s, node dropped",
                        rule.name,
                        victim.key,
                        extra={**extra, "rule": rule.name},
                    )
                    return None
        status = self.framework.preempt(overlay, bound, name, proposed)
        if status is not None:
            log.info(
                "preempt: the rules still fail the pod there (%s), node dropped",
                status.message,
                extra={**extra, "rule": status.rule},
            )
            return None
        return [v.uid for v in proposed], proposal.pdb_violations

    def bind(self, body: bytes) -> Answer:
        """The binding, if :func:`rulesched.extender.binding.refusal` finds nothing against it."""
        if not self.binding.enabled:  # (refused before its body is even read)
            return Answer(403, binding_result("the bind verb is off (rulesched extender --bind-verb turns it on)"))
        args = decode_binding_args(body)
        if self.api is None or self.mirror is None:
            return Answer(403, binding_result("rulesched extender has no API access (--kubeconfig or --in-cluster)"))
        self.sync()
        refused = refusal(args, self.binding, self._pending, self.store.pod_node, self._listed_nodes)
        if refused is not None:
            log.warning(
                "bind refused: %s",
                refused.reason,
                extra={"pod": f"{args.pod_namespace}/{args.pod_name}", "node": args.node},
            )
            return Answer(refused.status, binding_result(refused.reason))
        pod = self._pending[f"{args.pod_namespace}/{args.pod_name}"]
        return Answer(200, bind_pod(self.api, pod, args.node, self.store.snapshot(), self.binding.budget, self.clock))


def _same_version(a: Node, b: Node) -> bool:
    return bool(a.resource_version) and (a.resource_version, a.uid) == (b.resource_version, b.uid)


def _on(pod: Pod, node: str) -> Pod:
    return dataclasses.replace(pod, node_name=node)
