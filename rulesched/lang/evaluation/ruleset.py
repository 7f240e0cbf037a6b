"""Compiled rule sets and the sessions that bind them to pods: what the scheduler calls.

A :class:`RuleSet` is compiled once and then only read, by any number of threads. Evaluation
state lives in a :class:`Session`, one per thread (``rules.session()``): the bound equivalence
classes and the per-domain indexes cluster-wide built-ins keep. So evaluations for different pods
run concurrently (extender requests) without a lock on the hot path, and a reload that swaps in
a new set drops the old set's sessions with it (:class:`rulesched.lang.handle.RulesHandle`).

``session.bind(pod, cluster)`` evaluates guards once and returns
:class:`rulesched.lang.evaluation.bound.BoundRules`, whose filters, scores and preemption
predicates are plain functions of a node, each made (its pod-only parts evaluated once) when
first called: a class evaluated as columns never needs most of them. The filters of
:mod:`rulesched.lang.evaluation.prechecks` (a DRA pod's) come first in every binding. This mirrors a
kube-scheduler cycle: PreFilter work happens once per pod, Filter and Score per node.

Equivalent pods share one binding. Two pods are equivalent when every pod field the rules read
(the checker lists them) is equal — a ReplicaSet's pods usually are. Rules that read a pod's name
or uid, or the pod as a whole, make every pod its own class and switch this off. A built-in
whose per-pod answer reads cluster objects besides the pod (``spread_defaulted``: Services and
controllers) adds a token of them to the class key, so a changed cluster makes new classes.
Next stage: :mod:`rulesched.lang.evaluation.bound` (a binding, evaluated per node).
"""

from __future__ import annotations

import dataclasses
import functools
import operator
import threading
from collections import OrderedDict
from collections.abc import Callable, Collection, Hashable, Mapping, MutableMapping, Sequence
from functools import partial
from typing import Any, TypeVar

from rulesched.lang import schema
from rulesched.lang.builtins import BUILTINS
from rulesched.lang.builtins.dra import BOUND_CLAIMS
from rulesched.lang.context import ClusterView, EvalContext, new_index_store
from rulesched.lang.evaluation.bound import (
    BoundFilter,
    BoundPreempt,
    BoundRules,
    BoundScore,
    Make,
    never,
)
from rulesched.lang.evaluation.claims_key import ClaimsKeys, dra_claims_key
from rulesched.lang.evaluation.compile import CompiledRule, compile_rules
from rulesched.lang.evaluation.domain_values import DomainValues
from rulesched.lang.evaluation.prechecks import prechecks
from rulesched.lang.evaluation.stages import NodeMemos, Staged
from rulesched.lang.evaluation.terms import ScoreTerms
from rulesched.lang.evaluation.watch import RuleWatch
from rulesched.lang.frontend import ast
from rulesched.lang.frontend.checked import CheckedRules
from rulesched.lang.frontend.files import content_digest
from rulesched.lang.frontend.through_lets import DONE, INTO, STOP, Visit, through_lets
from rulesched.lang.types import MapOf
from rulesched.lang.values import SCORE_LIMIT, as_score
from rulesched.model import Pod
from rulesched.model.dra import EMPTY_DRA
from rulesched.semantics.dra_extended import extended_view
from rulesched.semantics.dra_pod import NodeRanking, request_record, with_claims

T = TypeVar("T")
_PER_POD_FIELDS = frozenset({"name", "uid", "*"})
_RANKINGS_KEPT = 100_000  # node orders kept per rule set (device_ranking); past it, afresh
_DEVICE_ONLY = frozenset({schema.DEVICE_VARIABLE, schema.REQUEST_VARIABLE})  # what a pod-independent device score reads
CLASS_CACHE_SIZE = 512  # equivalence classes a session keeps bound (least recently used go first)
# A rule whose cost bound is above this many steps per (pod, node) (about 0.2 ms at ~40 ns a
# step; no rule of the default profile comes near) is checked before each evaluation.
COSTLY_STEPS = 5_000


class RuleSet:
    """A checked, compiled set of rules; read-only once built (a reload builds a new one)."""

    @functools.cached_property
    def score_terms(self) -> ScoreTerms:
        """The lets each node score reads, for explanations (built when first asked)."""
        return ScoreTerms(self.checked)

    def __init__(
        self, checked: CheckedRules, files: Sequence[str] = (), digest: str | None = None, shadow_only: bool = False
    ) -> None:
        self.checked = checked
        self.files = tuple(files)
        # The content hash names the set in logs, metrics and events (given by the loader; for a
        # set built from trees directly, the texts its rules came from).
        self.digest = digest or content_digest(dict.fromkeys(r.rule.span.source.text for r in checked.rules))
        self.node_memos = NodeMemos()  # node-only values, per node (shared by the sessions)
        # Aggregates over domains (their node-stage factories), for the engine's column evaluator.
        domain_codes: dict[int, Any] = {}
        self.domain_codes = domain_codes
        # Audit-mode (shadow) filters never reject: they are compiled apart, into ``shadow`` (a
        # set of those filters alone, ``shadow_only``), which reports and metrics evaluate.
        audit = tuple(r for r in checked.rules if r.rule.audit and r.kind is ast.RuleKind.FILTER)
        self.shadow_filters: frozenset[str] = frozenset(r.name for r in audit)
        self.shadow: RuleSet | None = None
        if audit and not shadow_only:
            enforced = tuple(
                r for r in checked.rules if r.name not in self.shadow_filters or r.kind is not ast.RuleKind.FILTER
            )
            self.shadow = RuleSet(dataclasses.replace(checked, rules=audit), files, self.digest, shadow_only=True)
            compiled = compile_rules(dataclasses.replace(checked, rules=enforced), self.node_memos, domain_codes)
        else:
            compiled = compile_rules(checked, self.node_memos, domain_codes)
        # Rules that may take long for one node: checked before each evaluation (the others every
        # few nodes; see rulesched.lang.evaluation.watch).
        self._costly = frozenset(
            id(r) for r in compiled if checked.steps.get((r.checked.kind, r.name), 0) > COSTLY_STEPS
        )
        self.filters = tuple(r for r in compiled if r.checked.kind is ast.RuleKind.FILTER)
        self.scores = tuple(
            r for r in compiled if r.checked.kind is ast.RuleKind.SCORE and r.checked.rule.target == "node"
        )
        # `score NAME for device`: rank the devices the allocator tries for each DRA request
        self.device_scores = tuple(
            r for r in compiled if r.checked.kind is ast.RuleKind.SCORE and r.checked.rule.target == "device"
        )
        self.preempts = tuple(r for r in compiled if r.checked.kind is ast.RuleKind.PREEMPT)
        # Rules that read a pod's allocation on each node: DynamicResources' Filter then keeps it
        # with its verdict (shared between pods, rulesched.semantics.dra_after), not the verdict alone.
        self.reads_allocations = bool(checked.notes.context_calls & {"devices_after", "dra_score"})
        fields = checked.notes.pod_fields
        self.class_fields: tuple[str, ...] | None = None if fields & _PER_POD_FIELDS else tuple(sorted(fields))
        # Tokens of the cluster objects some built-in's per-pod answer reads (Services and
        # controllers, for spread_defaulted): a class is keyed by them too (see Session.bind).
        self.class_tokens = tuple(
            token
            for token in (BUILTINS[name].class_token for name in sorted(checked.notes.context_calls))
            if token is not None
        )
        # A class key part per pod field the rules read (see pod_getter), by length where
        # they only ever ask its length, left out where only fresh built-ins read it.
        notes = checked.notes
        self._class_getters = []
        for f in self.class_fields or ():
            get, is_map = pod_getter(f)
            reads = notes.pod_field_reads.get(f, 0)
            if f in notes.builtin_pod_fields or reads > notes.pod_len_reads.get(f, 0):
                self._class_getters.append((get, is_map))
            elif reads:  # only ever len(pod.f) (and fresh built-ins): pods of one length are alike
                self._class_getters.append((_length(get), False))
            # else: only fresh built-ins read it, anew for each pod (a pod's own claims)
        # The domain and cluster aggregates each rule reads, and their values (explanations).
        self.domain_values = DomainValues(checked, self.domain_codes)
        self._by_priority = {
            id(r): _victim_priority_only(r.checked.rule.body, checked.notes, checked.lets) for r in self.preempts
        }
        self._local = threading.local()
        self._memos: dict[Callable[[RuleSet], Any], Any] = {}
        self._memo_lock = threading.Lock()
        self._rankings: dict[Any, Any] = {}  # device scores' node orders (device_ranking)

    def memo(self, make: Callable[[RuleSet], T]) -> T:
        """``make(self)``, made once per set (under a lock: sessions of several threads read it)
        and kept with it, so it goes when a reload drops the set: the engine's column plan,
        which this layer holds and never reads."""
        found = self._memos.get(make)
        if found is None:
            with self._memo_lock:
                found = self._memos.get(make)
                if found is None:
                    found = self._memos[make] = make(self)
        result: T = found
        return result

    def session(self) -> Session:
        """This thread's session with this rule set (made on first use)."""
        session: Session | None = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = Session(self)
        return session

    def in_audit_mode(self, names: Collection[str]) -> RuleSet:
        """This set with the filters ``names`` in audit mode (as if written ``audit filter``):
        evaluated and reported, never rejecting. What explain's rule fixes try."""
        return self.adjusted(audit=names)

    def adjusted(
        self,
        audit: Collection[str] = (),
        dropped: Collection[str] = (),
        weights: Mapping[str, int] | None = None,
    ) -> RuleSet:
        """This set changed as explain's rule fixes change it: the filters ``audit`` in audit
        mode, the preempt rules ``dropped`` gone (``disable preempt NAME``), the node scores of
        ``weights`` given those weights (0: gone, ``disable score NAME``). The rules' trees are
        shared, so no expression is checked again."""
        weights = dict(weights or {})
        rules = []
        for r in self.checked.rules:
            if r.kind is ast.RuleKind.FILTER and r.name in audit:
                r = dataclasses.replace(r, rule=dataclasses.replace(r.rule, audit=True))
            elif r.kind is ast.RuleKind.PREEMPT and r.name in dropped:
                continue
            elif r.kind is ast.RuleKind.SCORE and r.rule.target == "node" and r.name in weights:
                if weights[r.name] <= 0:
                    continue
                r = dataclasses.replace(r, weight=weights[r.name])
            rules.append(r)
        parts = [f"audit:{','.join(sorted(audit))}"] if audit else []
        parts += [f"drop:{','.join(sorted(dropped))}"] if dropped else []
        parts += [f"weight:{','.join(f'{k}={v}' for k, v in sorted(weights.items()))}"] if weights else []
        digest = "+".join([self.digest, *parts])
        return RuleSet(dataclasses.replace(self.checked, rules=tuple(rules)), self.files, digest)

    def drop_caches(self) -> None:
        """Forget every thread's session (a swapped-out set's caches go with it); a session in
        use keeps working for its holder until it lets go."""
        self._local = threading.local()

    def bind(self, pod: Pod, cluster: ClusterView | None = None) -> BoundRules:
        """``self.session().bind(pod, cluster)``."""
        return self.session().bind(pod, cluster)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(r.name for r in self.checked.rules)

    def class_key(self, pod: Pod, claims_key: str | None = None) -> tuple[Any, ...] | None:
        """The pod's equivalence class: the values of every field the rules read (``claims_key``:
        its claims' part, ``dra_claims_key(pod)``, when the caller has it already)."""
        if self.class_fields is None:
            return None
        getters = self._class_getters
        if claims_key is not None:
            return tuple(
                [
                    claims_key if get is dra_claims_key else frozenset(get(pod).items()) if is_map else get(pod)
                    for get, is_map in getters
                ]
            )
        return tuple([frozenset(get(pod).items()) if is_map else get(pod) for get, is_map in getters])

    def _ranking(self, ctx: EvalContext, watch: RuleWatch) -> tuple[NodeRanking | None, Hashable | None]:
        """The device scores that apply to ``ctx.pod``, as the allocator's ranking (a DRA pod's),
        and what it depends on when every pod they apply to is ranked alike (they read the
        device and the request alone): this set and their names; else None."""
        if not ctx.pod.resource_claims:
            return None, None
        device_scores = [r for r in self.device_scores if _applies(r, ctx, watch)]
        if not device_scores:
            return None, (self.digest, ())
        alike = all(_device_only(r) for r in device_scores)
        names = tuple(r.name for r in device_scores)
        key = (self.digest, names) if alike else None
        # ... and reading the device alone, a node's order is the same for every request there
        devices_only = alike and all(schema.REQUEST_VARIABLE not in r.body.free for r in device_scores)
        return device_ranking(device_scores, ctx, watch, (self._rankings, names) if devices_only else None), key

    @functools.cached_property
    def ranks_devices_alike(self) -> bool:
        """Whether the device scores rank every pod's candidates alike (none guarded, each
        reading the device and the request alone): an allocation is then a function of the
        claims and the node (rules calling ``devices_after`` may be shared between classes)."""
        return all(r.guard is None and _device_only(r) for r in self.device_scores)

    def rebind_claims(self, bound: BoundRules, pod: Pod, cluster: ClusterView | None) -> None:
        """A class's binding rebound to another DRA pod: that pod's claims (and the device
        scores' ranking for it) behind the DynamicResources precheck."""
        # (the device scores that apply are the class's, as its filters and scores are: made once)
        if bound.device_ranking is None:
            bound.device_ranking = self._ranking(bound.ctx, bound.watch)
        first, claims = prechecks(pod, cluster, *bound.device_ranking)
        bound.filters[0].passes = first[0].passes
        bound.filters[0].reasons = first[0].reasons
        bound.filters[0].unresolvable = first[0].unresolvable
        bound.filters[0].many = first[0].many
        if claims is not None:
            claims.keep_allocations = self.reads_allocations
        bound.dra_claims = claims
        bound.ctx.scratch[BOUND_CLAIMS] = claims

    def bind_new(
        self,
        pod: Pod,
        cluster: ClusterView | None,
        indexes: MutableMapping[Any, Any],
        cache: bool,
        watch: RuleWatch | None = None,
    ) -> BoundRules:
        """A new binding of the rules to ``pod`` (sessions cache them; see :class:`Session`),
        reporting to ``watch`` (the session's)."""
        if pod.resource_claims and cluster is not None:  # pod.resource_claims as the cluster has them
            pod = with_claims(pod, getattr(cluster, "dra", EMPTY_DRA))
        if pod.extended_requests and not pod.extended_dra and cluster is not None:
            pod = extended_view(pod, _classes(cluster))
        ctx = EvalContext(pod, cluster, indexes=indexes)
        watch = watch if watch is not None else RuleWatch()
        filter_rules = [r for r in self.filters if _applies(r, ctx, watch)]
        score_rules = [r for r in self.scores if _applies(r, ctx, watch)]
        preempts = tuple(
            _bind_preempt(r, ctx, watch, self._by_priority[id(r)]) for r in self.preempts if _applies(r, ctx, watch)
        )
        ranking = self._ranking(ctx, watch)
        first, claims = prechecks(pod, cluster, *ranking)  # (node by node: no column, no share)
        uses = (
            (*(frozenset[str]() for _ in first), *(frozenset(r.context) for r in filter_rules)),
            tuple(frozenset(r.context) for r in score_rules),
        )
        bound = BoundRules(
            ctx,
            (*first, *(_bind_filter(r, ctx, watch if id(r) in self._costly else None) for r in filter_rules)),
            tuple(_bind_score(r, ctx, watch if id(r) in self._costly else None) for r in score_rules),
            preempts,
            uses,
            cached=cache,
            watch=watch,
            rule_set=self,
            compiled=(tuple(filter_rules), tuple(score_rules)),
            prechecked=len(first),
            domain_values=self.domain_values,
        )
        bound.dra_claims = claims
        bound.device_ranking = ranking
        if claims is not None:
            claims.keep_allocations = self.reads_allocations
            ctx.scratch[BOUND_CLAIMS] = claims
        return bound


class Session:
    """One thread's evaluation state for one rule set: bound classes of pods, each with its
    per-node caches (a bounded LRU), and the per-domain indexes cluster-wide built-ins keep
    between cycles. Not shared between threads. Every binding it makes reports to its ``watch``,
    which a caller arms to give an evaluation up (:mod:`rulesched.lang.evaluation.watch`)."""

    def __init__(self, rules: RuleSet) -> None:
        self.rules = rules
        # (an OrderedDict, the least recently used first: a hit is ~0.1 us, cachetools' LRU ~2 us)
        self.classes: OrderedDict[Any, BoundRules] = OrderedDict()
        self.indexes = new_index_store()
        self.watch = RuleWatch()
        self.claims_keys = ClaimsKeys()

    def bind(self, pod: Pod, cluster: ClusterView | None = None) -> BoundRules:
        """The rules bound to ``pod`` in ``cluster``: its class's binding, rebound to this pod
        (same guards and pod-only values), or a binding of its own."""
        rules = self.rules
        if cluster is not None:
            rules.node_memos.fit(len(cluster.node_views()))
        claims_key = None
        if pod.extended_requests and cluster is not None:  # requests a DeviceClass serves: DRA's
            pod = extended_view(pod, _classes(cluster))
        if pod.extended_dra:  # (the claim made for them is the pod's own: no class shared)
            return rules.bind_new(pod, cluster, self.indexes, cache=False, watch=self.watch)
        if pod.resource_claims:
            # Pods whose claims ask the same of the same devices (one template's, not allocated
            # yet) share a class: the DynamicResources verdict is the same for them on a node
            # whose devices have not changed; the claims themselves are the pod's (rebind_claims).
            if cluster is not None:
                pod = with_claims(pod, getattr(cluster, "dra", EMPTY_DRA))
            claims_key = self.claims_keys.key(pod)
        key = rules.class_key(pod, claims_key)
        if key is None or (pod.resource_claims and claims_key is None):
            return rules.bind_new(pod, cluster, self.indexes, cache=False, watch=self.watch)
        if claims_key is not None:
            key = (key, claims_key)
        if rules.class_tokens:  # guards decided by cluster objects: a change makes a new class
            key = (key, tuple([token(cluster) for token in rules.class_tokens]))
        classes = self.classes
        bound = classes.get(key)
        if bound is not None:
            classes.move_to_end(key)
            bound.rebind(pod, cluster)
            if pod.resource_claims:
                rules.rebind_claims(bound, pod, cluster)
            return bound
        bound = classes[key] = rules.bind_new(pod, cluster, self.indexes, cache=True, watch=self.watch)
        if len(classes) > CLASS_CACHE_SIZE:
            classes.popitem(last=False)
        return bound

    def bind_private(self, pod: Pod, cluster: ClusterView, indexes: MutableMapping[Any, Any]) -> BoundRules:
        """An uncached binding for a view nobody else evaluates against (preemption's overlay),
        with its own index store."""
        return self.rules.bind_new(pod, cluster, indexes, cache=False, watch=self.watch)


def device_ranking(
    rules: Sequence[CompiledRule],
    ctx: EvalContext,
    watch: RuleWatch,
    kept: tuple[dict[Any, Any], tuple[str, ...]] | None = None,
) -> NodeRanking:
    """The allocator's order of one request's candidate devices on a node: by the weighted sum
    of the device scores (highest first), upstream's order among equals. The candidates are the
    allocator's; the rules read them as node.devices shows them (``device``) and the request as
    ``request``; a device the node's view does not show is ranked as scoring 0. ``kept``: where
    the rules read the device alone, a table (and their names) keeping each node's order for
    every pod, while the node's devices and its candidates are the objects it was worked out for."""
    bodies = [
        (r.body.factory()(ctx) if not r.body.is_const else None, r.body.const, r.checked.weight, r.name) for r in rules
    ]

    def rank(claim: Any, request_name: str, candidates: Sequence[Any], node: Any = None) -> Sequence[Any]:
        devices = getattr(node, "devices", ())
        if kept is not None:
            table, names = kept
            key = (names, getattr(node, "name", None))
            hit = table.get(key)
            if hit is not None and hit[0] is devices and hit[1] is candidates:
                found: Sequence[Any] = hit[2]
                return found
            ranked = ranking(claim, request_name, candidates, devices, node)
            if len(table) > _RANKINGS_KEPT:
                table.clear()
            table[key] = (devices, candidates, ranked)
            return ranked
        return ranking(claim, request_name, candidates, devices, node)

    def ranking(claim: Any, request_name: str, candidates: Sequence[Any], devices: Any, node: Any) -> list[Any]:
        views = {d.id: d for d in devices}
        request = request_record(claim, request_name)
        totals = []
        for cand in candidates:
            view = views.get(cand.id)
            total = 0
            if view is not None:
                env = {0: view, 1: request}
                for body, const, weight, name in bodies:
                    watch.rule = name
                    value = const if body is None else body(node, env)
                    total += weight * as_score(value)
            totals.append(total)
        order = sorted(range(len(candidates)), key=lambda i: -totals[i])  # (stable: upstream's among equals)
        return [candidates[i] for i in order]

    return rank


def _classes(cluster: Any) -> Mapping[str, Any]:
    """The DeviceClasses of a cluster view (a snapshot's DRA state, or a store's cache)."""
    dra = getattr(cluster, "dra", EMPTY_DRA)
    return getattr(getattr(dra, "state", dra), "classes", {})


def pod_getter(name: str) -> tuple[Callable[[Any], Any], bool]:
    """A pod field's value as a class key part, and whether it is a map (keyed by its items).
    Raw model attributes where there is one (None and () differ for node affinity), else the
    field's getter (has_required_node_affinity is derived). (Decided here from the schema: an
    isinstance check per field per pod costs more than the rest of the key.)"""
    field = schema.RECORDS[schema.POD][name]
    if name == "resource_claims":  # (what they ask, not the claims' own names: see dra_claims_key)
        return dra_claims_key, False
    get = operator.attrgetter(name) if name in Pod.__dataclass_fields__ else field.get
    return get, isinstance(field.type, MapOf)


def _length(get: Callable[[Pod], Any]) -> Callable[[Pod], int]:
    return lambda pod: len(get(pod))


def _device_only(rule: CompiledRule) -> bool:
    """A device score that reads nothing but the device and the request."""
    return rule.body.is_const or (rule.body.static is not None and rule.body.free <= _DEVICE_ONLY)


def _applies(rule: CompiledRule, ctx: EvalContext, watch: RuleWatch) -> bool:
    if rule.guard is None:
        return True
    watch.rule = rule.name
    return bool(_node_fn(rule.guard, ctx)(None))


def _node_fn(code: Staged, ctx: EvalContext) -> Callable[[Any], Any]:
    """The code as a one-argument function of a node: compiled node functions take
    ``(node, env=None)`` and make their own env where they loop, so no wrapper is needed."""
    if code.is_const:
        value = code.const
        return lambda n: value
    return code.factory()(ctx)


def _checking(make: Make, rule: CompiledRule, watch: RuleWatch | None) -> Make:
    """``make``, whose functions (when ``watch`` is given: a costly rule's) say to ``watch`` that
    ``rule`` runs and check it, before each call."""
    if watch is None:
        return make
    check, name = watch.check, rule.name

    def made(part: str) -> Callable[..., Any]:
        fn = make(part)

        def checked(node: Any) -> Any:
            watch.rule = name
            check()
            return fn(node)

        return checked

    return made


def _bind_filter(rule: CompiledRule, ctx: EvalContext, watch: RuleWatch | None) -> BoundFilter:
    return BoundFilter(rule.name, make=_checking(partial(_filter_part, rule, ctx), rule, watch))


def _filter_part(rule: CompiledRule, ctx: EvalContext, part: str) -> Callable[[Any], Any]:
    """A bound filter's ``passes``, ``reasons`` or ``unresolvable``, made when first asked for."""
    if part == "passes":
        return _node_fn(rule.body, ctx)
    if part == "unresolvable":
        return _unresolvable(rule.unresolvable, ctx)
    default = (f"node(s) didn't satisfy rule {rule.name}",)
    if rule.reason is None:
        return lambda n: default
    reason = _node_fn(rule.reason, ctx)

    def reasons(n: Any) -> tuple[str, ...]:
        value = reason(n)
        if isinstance(value, str):
            return (value,) if value else default
        return tuple(value) or default

    return reasons


def _unresolvable(code: Staged | None, ctx: EvalContext) -> Callable[[Any], bool]:
    if code is None or (code.is_const and not code.const):
        return never
    if code.is_const:
        return _always
    condition = _node_fn(code, ctx)
    return lambda n: bool(condition(n))


def _always(node: Any) -> bool:
    return True


def _bind_score(rule: CompiledRule, ctx: EvalContext, watch: RuleWatch | None) -> BoundScore:
    make = _checking(partial(_score_part, rule, ctx), rule, watch)
    return BoundScore(rule.name, rule.checked.weight, rule.checked.normalize, make=make)


def _score_part(rule: CompiledRule, ctx: EvalContext, part: str) -> Callable[[Any], int]:
    fn = _node_fn(rule.body, ctx)

    def score(n: Any) -> int:
        # int() is as_score for ints, bools and finite floats (truncation toward zero) of up to
        # 4,000 digits; NaN and the infinities raise, and as_score makes them 0 (and holds the
        # rest at SCORE_LIMIT).
        value = fn(n)
        try:
            whole = int(value)
        except (ValueError, OverflowError):
            return as_score(value)
        return whole if -SCORE_LIMIT <= whole <= SCORE_LIMIT else as_score(whole)

    return score


def _victim_priority_only(body: ast.Expr, notes: Any, lets: dict[str, ast.Let]) -> bool:
    """Whether a preempt body reads the victim only as ``victim.priority``, and not the node
    (lets included): its answer is then one per priority, for a given pod."""

    def visit(e: ast.Expr, parent: ast.Expr | None) -> Visit:
        if not isinstance(e, ast.Name):
            return INTO
        ref = notes.names[id(e)]
        if ref.kind == "bound":
            return DONE
        if ref.name == schema.NODE_VARIABLE:
            return STOP
        if ref.name == schema.VICTIM_VARIABLE:
            return DONE if isinstance(parent, ast.Attr) and parent.name == "priority" else STOP
        return DONE

    return through_lets(body, notes, lets, visit)


def _bind_preempt(rule: CompiledRule, ctx: EvalContext, watch: RuleWatch, by_priority: bool = False) -> BoundPreempt:
    body = rule.body.factory()(ctx) if not rule.body.is_const else None
    const = rule.body.const
    env: dict[int, Any] = {}
    name = rule.name

    def allows(node: Any, victim: Pod) -> bool:
        if body is None:
            return bool(const)
        watch.rule = name
        env[0] = victim
        return bool(body(node, env))

    order = _node_fn(rule.order, ctx) if rule.order is not None else None
    return BoundPreempt(rule.name, allows, order, by_priority)
