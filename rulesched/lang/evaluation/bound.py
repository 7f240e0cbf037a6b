"""Rules bound to one pod: filters, scores and preemption predicates as functions of a node.

:meth:`rulesched.lang.evaluation.ruleset.Session.bind` makes these; the scheduler calls them per
node. Guards were evaluated at bind time and pod-only parts are evaluated once, when a rule's
function is first made (kube-scheduler's PreFilter), so a filter is a plain ``node -> bool``. A :class:`BoundRules` belongs to one session (one thread):
its context and caches change from pod to pod of its class, never concurrently.

A binding shared by a class of equivalent pods (``cached``) keeps each node's filter outcome
and raw scores, stamped with the node info (and its generation) and with the version tokens of
the cluster-wide built-ins the rules call; a stamp that no longer matches means the entry is
recomputed. The caches hold one entry per node name, so they never outgrow the cluster, and go
with the binding when its session forgets the class. Evaluations report which rule they are in
to the session's ``watch``, which may stop them (:mod:`rulesched.lang.evaluation.watch`).
Next stage: the scheduler's cycle (rulesched.scheduler.cycle) walks nodes with these, node by node
or, through the engine (rulesched.engine.batch), as columns.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from rulesched.lang.builtins import BUILTINS
from rulesched.lang.context import ClusterView, EvalContext
from rulesched.lang.evaluation.domain_values import DomainValues
from rulesched.lang.evaluation.timer import RuleTimer
from rulesched.lang.evaluation.watch import CHECK_EVERY, RuleWatch
from rulesched.model import Pod

if TYPE_CHECKING:
    from rulesched.lang.evaluation.compile import CompiledRule

T = TypeVar("T")


def never(node: Any) -> bool:
    """The unresolvable condition of a filter that has none."""
    return False


# A bound rule's node functions are made on first use (``make(attribute)``): a pod unlike any
# before it is mostly evaluated as columns, so most of its functions would never be called, and
# each made is a dozen closure objects that the garbage collector walks for as long as the
# class lives (on the `distinct` benchmark, 2 241 of 48 000 were ever called).
Make = Callable[[str], Callable[..., Any]]


class _Lazy:
    __slots__ = ()

    def __getattr__(self, attr: str) -> Any:  # called only while the slot is still empty
        make: Make | None = object.__getattribute__(self, "_make")
        if make is None or attr not in type(self)._made:  # type: ignore[attr-defined]
            raise AttributeError(attr)
        fn = make(attr)
        setattr(self, attr, fn)
        return fn


class BoundFilter(_Lazy):
    """A filter bound to one pod: ``passes(node)``, and for a node that fails, ``reasons(node)``
    and ``unresolvable(node)`` — whether preemption cannot fix it (kube-scheduler's
    UnschedulableAndUnresolvable rather than Unschedulable), asked only of failing nodes and
    only by those who need it (preemption, the extender, explain), never on the walk."""

    __slots__ = ("name", "_make", "passes", "reasons", "unresolvable", "many")
    _made = frozenset({"passes", "reasons", "unresolvable"})
    passes: Callable[[Any], bool]
    reasons: Callable[[Any], tuple[str, ...]]
    unresolvable: Callable[[Any], bool]
    # ``[passes(node) for node in nodes]`` in one call, where the filter has it (the
    # DynamicResources precheck: a walk asks it of many nodes at once), else None
    many: Callable[[Sequence[Any]], list[bool]] | None

    def __init__(
        self,
        name: str,
        passes: Callable[[Any], bool] | None = None,
        reasons: Callable[[Any], tuple[str, ...]] | None = None,
        unresolvable: Callable[[Any], bool] | None = None,
        make: Make | None = None,
        many: Callable[[Sequence[Any]], list[bool]] | None = None,
    ) -> None:
        self.name, self._make, self.many = name, make, many
        if passes is not None:
            self.passes = passes
        if reasons is not None:
            self.reasons = reasons
        if unresolvable is not None or make is None:
            self.unresolvable = unresolvable or never

    def __repr__(self) -> str:
        return f"BoundFilter({self.name!r})"


class BoundScore(_Lazy):
    """A score bound to one pod: ``score(node)``, with the rule's weight and normalisation."""

    __slots__ = ("name", "weight", "normalize", "_make", "score")
    _made = frozenset({"score"})
    score: Callable[[Any], int]

    def __init__(
        self,
        name: str,
        weight: int,
        normalize: str,
        score: Callable[[Any], int] | None = None,
        make: Make | None = None,
    ) -> None:
        self.name, self.weight, self.normalize, self._make = name, weight, normalize, make
        if score is not None:
            self.score = score

    def __repr__(self) -> str:
        return f"BoundScore({self.name!r}, weight={self.weight})"


@dataclass(frozen=True)
class BoundPreempt:
    name: str
    allows: Callable[[Any, Pod], bool]  # (node, victim) -> may the victim be evicted?
    order: Callable[[Any], Any] | None  # node -> sort key, lowest preferred
    # The body reads the victim only as victim.priority and not the node: one answer per
    # priority (preemption asks once per priority, not once per running pod).
    by_priority: bool = False


Failure = tuple[BoundFilter, tuple[str, ...]]


class BoundRules:
    """The rules that apply to one pod (guards already decided), as functions of a node.

    :meth:`first_failure` and :meth:`score_vector` are what the scheduler calls per node; with
    ``cached`` they keep their answers per node (see the module docstring).
    The engine (:mod:`rulesched.engine.batch`) gives the same answers for many nodes at once,
    as columns where a rule allows, from what the binding says of itself: the compiled rules it
    was bound from (``compiled``, after ``prechecked`` prechecks), which filters are dynamic and
    which scores volatile, the built-ins each calls. It keeps its own per-binding state in
    :meth:`memo`, which this layer holds and never reads. Call :meth:`refresh` after the cluster
    changed within a cycle.
    """

    def __init__(
        self,
        ctx: EvalContext,
        filters: tuple[BoundFilter, ...],
        scores: tuple[BoundScore, ...],
        preempts: tuple[BoundPreempt, ...],
        uses: tuple[tuple[frozenset[str], ...], ...] = ((), ()),
        cached: bool = False,
        watch: RuleWatch | None = None,
        rule_set: object | None = None,
        compiled: tuple[tuple[CompiledRule, ...], tuple[CompiledRule, ...]] = ((), ()),
        prechecked: int = 0,
        domain_values: DomainValues | None = None,
    ) -> None:
        self.ctx = ctx
        self._domain_values = domain_values
        self.watch = watch if watch is not None else RuleWatch()
        # Where the binding came from (None: made by hand, evaluated node by node only): the set
        # (a rulesched.lang.evaluation.ruleset.RuleSet, which imports this module: typed as an
        # object here, the engine checks it), the filter and score rules that applied (after the ``prechecked`` prechecks, which
        # come first in ``filters``), for the engine's column evaluation.
        self.rule_set = rule_set
        self.compiled = compiled
        self.prechecked = prechecked
        self._memos: dict[Callable[[BoundRules], Any], Any] = {}
        self.filters = filters
        self.scores = scores
        self.preempts = preempts
        self.cached = cached
        # The cluster-wide built-ins each filter and each score calls; which of them move with
        # (nearly) every change is decided again at each refresh.
        self._filter_uses, self._score_uses = uses
        self._names = sorted({n for names in (*self._filter_uses, *self._score_uses) for n in names})
        self._moving: frozenset[str] | None = None
        self._versions: tuple[Callable[[EvalContext], object], ...] = ()  # of the steady built-ins
        self._volatile: frozenset[int] = frozenset()  # indexes of scores never cached
        self._dynamic: tuple[int, ...] = ()  # indexes of filters evaluated afresh each time, in order
        self._dynamic_set: frozenset[int] = frozenset()
        # node name -> (node info, its generation, token, answer): one entry per node
        self._outcomes: dict[str, tuple[Any, int, object, tuple[int, Failure] | None]] = {}
        self._vectors: dict[str, tuple[Any, int, object, tuple[int, ...]]] = {}
        self._token: object = ()
        self.timer: RuleTimer | None = None  # set while a sampled cycle times the rules (timing.timed)
        # a DRA pod's claims (rulesched.semantics.dra_pod.PodClaims), which its DynamicResources
        # precheck filters with; Reserve reads the chosen node's allocation from them
        self.dra_claims: Any = None
        # ... and the device scores' ranking its claims are allocated by, with what it depends on
        # (RuleSet._ranking): the class's, made when the class is bound
        self.device_ranking: Any = None
        self.refresh()

    def rebind(self, pod: Pod, cluster: ClusterView | None) -> None:
        """Use this binding for another pod of its class, in (a newer view of) the cluster."""
        ctx = self.ctx
        ctx.pod, ctx.cluster, ctx.feasible = pod, cluster, None
        self.refresh()

    def device_allocations(self, node: Any) -> tuple[Mapping[str, Any], tuple[str, ...], Any] | None:
        """DynamicResources' Reserve on ``node`` (a view of this binding's cluster): the
        allocations of the pod's claims to allocate there, as its Filter found them (ranked by
        the rules' device scores), the claims to reserve for it, and the claim to make for its
        DRA-served extended resources with its requests' mappings (or None); None without
        claims."""
        found = self.dra_claims
        if found is None:
            return None
        return found.allocations(node), found.reserve(), found.made_claim(node)

    def release(self) -> None:
        """Let go of the cluster view and what was computed from it (the caller is done with
        this pod): a snapshot nobody holds lets its store change in place again."""
        ctx = self.ctx
        ctx.cluster, ctx.feasible = None, None
        ctx.scratch.clear()
        if self.dra_claims is not None:  # (its allocator reads the store's tables, copied while read)
            self.dra_claims = None
            first = self.filters[0]  # (the DynamicResources precheck: rebind_claims makes it anew)
            first.passes = first.reasons = first.unresolvable = _released
            first.many = None

    def refresh(self) -> None:
        """Start afresh after a cluster change: per-pod precomputation and version stamps."""
        ctx = self.ctx
        ctx.scratch.clear()
        if self._names:
            moving = frozenset(n for n in self._names if _moves(n, ctx))
            if moving != self._moving:
                self._split(moving)
            # The moving set is part of the stamp: cached outcomes leave the dynamic filters out.
            # Stamps are compared by identity (per node, per pod), so an equal one is kept.
            token = (tuple(v(ctx) for v in self._versions), moving)
            if token != self._token:
                self._token = token

    def _split(self, moving: frozenset[str]) -> None:
        self._moving = moving
        self._dynamic = tuple(i for i, names in enumerate(self._filter_uses) if names & moving)
        self._dynamic_set = frozenset(self._dynamic)
        self._volatile = frozenset(i for i, names in enumerate(self._score_uses) if names & moving)
        steady = [n for n in self._names if n not in moving]
        self._versions = tuple(v for v in (BUILTINS[n].version for n in steady) if v is not None)

    def reads_domains(self, name: str) -> bool:
        """Whether filter ``name`` reads any domain or cluster aggregate (:meth:`domain_values`
        may then differ from node to node; else it is always empty)."""
        return self._domain_values is not None and bool(self._domain_values.reads(name))

    def domain_values(self, name: str, node: Any) -> tuple[str, ...]:
        """The values on ``node`` of the domain and cluster aggregates filter ``name`` reads,
        as ``app_here = 3 in zone=a`` (explanations; empty for a filter that reads none)."""
        if self._domain_values is None:
            return ()
        return tuple(v.text() for v in self._domain_values.values(name, self.ctx, node))

    def memo(self, make: Callable[[BoundRules], T]) -> T:
        """``make(self)``, made once per binding and kept with it (the engine's column bodies:
        they go when the session forgets the class)."""
        try:
            found: T = self._memos[make]
        except KeyError:
            found = self._memos[make] = make(self)
        return found

    # --- for batch evaluation (rulesched.engine): the cached part and the rest -----------------
    @property
    def dynamic_indexes(self) -> frozenset[int]:
        """Indexes of the filters evaluated afresh for every node."""
        return self._dynamic_set

    @property
    def volatile_indexes(self) -> frozenset[int]:
        """Indexes of the scores never cached."""
        return self._volatile

    @property
    def filter_uses(self) -> tuple[frozenset[str], ...]:
        """The cluster-wide built-ins each filter calls."""
        return self._filter_uses

    @property
    def score_uses(self) -> tuple[frozenset[str], ...]:
        """The cluster-wide built-ins each score calls."""
        return self._score_uses

    @property
    def token(self) -> object:
        """The stamp answers of :meth:`static_failure` and :meth:`steady_vector` stay valid under
        while a node is unchanged; a new object after a refresh that changed anything."""
        return self._token

    def static_failure(self, node: Any) -> Failure | None:
        """The first failure among the filters that are not dynamic (uncached)."""
        found = self._static_failure(node)
        return None if found is None else found[1]

    @property
    def dynamic_indices(self) -> frozenset[int]:
        """The indexes (in :attr:`filters`) of the filters evaluated afresh for every node."""
        return self._dynamic_set

    @property
    def dynamic_filters(self) -> tuple[BoundFilter, ...]:
        """Filters evaluated afresh for every node, in rule order."""
        return tuple(self.filters[i] for i in self._dynamic)

    def steady_vector(self, node: Any) -> tuple[int, ...]:
        """:meth:`score_vector` with the volatile scores left at 0 (and out of the fixed sum)."""
        return self._vector(node, self._volatile)

    @property
    def volatile_scores(self) -> tuple[tuple[int, BoundScore], ...]:
        return tuple((i, self.scores[i]) for i in sorted(self._volatile))

    def _first_failure(self, node: Any) -> Failure | None:
        watch = self.watch
        for f in self.filters:
            watch.rule = f.name
            if not f.passes(node):
                return f, f.reasons(node)
        return None

    def _static_failure(self, node: Any) -> tuple[int, Failure] | None:
        """The first failing filter among those whose answers are cached, with its index."""
        dynamic, watch = self._dynamic_set, self.watch
        for i, f in enumerate(self.filters):
            if i not in dynamic:
                watch.rule = f.name
                if not f.passes(node):
                    return i, (f, f.reasons(node))
        return None

    def _with_dynamic(self, node: Any, static: tuple[int, Failure] | None) -> Failure | None:
        """Merge the cached outcome with the filters evaluated afresh, keeping rule order."""
        limit = static[0] if static is not None else len(self.filters)
        for i in self._dynamic:
            if i >= limit:
                break
            f = self.filters[i]
            self.watch.rule = f.name
            if not f.passes(node):
                return f, f.reasons(node)
        return static[1] if static is not None else None

    def _cached_static(self, node: Any) -> tuple[int, Failure] | None:
        hit = self._outcomes.get(node.name)
        if hit is not None and hit[0] is node and hit[1] == node.generation and hit[2] is self._token:
            return hit[3]
        static = self._static_failure(node)
        self._outcomes[node.name] = (node, node.generation, self._token, static)
        return static

    def _cached_outcome(self, node: Any) -> Failure | None:
        static = self._cached_static(node)
        if not self._dynamic:
            return static[1] if static is not None else None
        return self._with_dynamic(node, static)

    def first_failure(self, node: Any) -> Failure | None:
        """The first filter (in rule order) the node fails, with its reasons; None if it fits."""
        if not self.cached:
            return self._first_failure(node)
        return self._cached_outcome(node)

    def feasible(
        self,
        nodes: Sequence[Any],
        start: int,
        wanted: int,
        failed: Callable[[Any, Failure], None] | None = None,
    ) -> tuple[list[Any], int]:
        """Walk ``nodes`` round-robin from ``start`` until ``wanted`` fit; report each node that
        does not to ``failed``, with its failure (if given: reasons cost work a scheduled pod
        does not need).
        Returns the feasible nodes and how many nodes were looked at. (The loop of
        :meth:`first_failure`, inlined: it runs for hundreds of nodes per pod.)"""
        found: list[Any] = []
        append = found.append
        token, outcomes = self._token, self._outcomes
        evaluate = self._first_failure if not self.cached else self._cached_outcome if self._dynamic else None
        static_failure = self._static_failure
        looked, tick, left = 0, self.watch.tick, CHECK_EVERY
        for node in itertools.chain(nodes[start:], nodes[:start]):
            looked += 1
            left -= 1
            if not left:
                left = tick()
            if evaluate is None:  # the common case, inlined: one cache lookup per node
                name, generation = node.name, node.generation
                hit = outcomes.get(name)
                if hit is not None and hit[0] is node and hit[1] == generation and hit[2] is token:
                    static = hit[3]
                else:
                    static = static_failure(node)
                    outcomes[name] = (node, generation, token, static)
                if static is None:
                    append(node)
                    if len(found) >= wanted:
                        break
                elif failed is not None:
                    failed(node, static[1])
                continue
            outcome = evaluate(node)
            if outcome is None:
                append(node)
                if len(found) >= wanted:
                    break
            elif failed is not None:
                failed(node, outcome)
        return found, looked

    def score_vectors(self, nodes: Sequence[Any]) -> list[tuple[int, ...]]:
        """:meth:`score_vector` for many nodes, with the cache lookup inlined."""
        if not self.cached or self._volatile:
            return self.watch.each(self.score_vector, nodes)
        token, cache, compute = self._token, self._vectors, self._vector
        out = []
        tick, left = self.watch.tick, CHECK_EVERY
        for node in nodes:
            left -= 1
            if not left:
                left = tick()
            name, generation = node.name, node.generation
            hit = cache.get(name)
            if hit is not None and hit[0] is node and hit[1] == generation and hit[2] is token:
                out.append(hit[3])
            else:
                vector = compute(node, ())
                cache[name] = (node, generation, token, vector)
                out.append(vector)
        return out

    def score_vector(self, node: Any) -> tuple[int, ...]:
        """Every score rule's raw value for the node, in rule order, then one more element: the
        weighted sum of the rules that are not normalised (their share of the total is final)."""
        if not self.cached:
            return self._vector(node, ())
        hit = self._vectors.get(node.name)
        if hit is not None and hit[0] is node and hit[1] == node.generation and hit[2] is self._token:
            vector: tuple[int, ...] = hit[3]
        else:
            vector = self._vector(node, self._volatile)
            self._vectors[node.name] = (node, node.generation, self._token, vector)
        if self._volatile:
            vector = self._vector(node, (), vector)
        return vector

    def _vector(self, node: Any, skip: Collection[int], known: tuple[int, ...] = ()) -> tuple[int, ...]:
        """Raw scores (0 for ``skip``, reused from ``known`` unless volatile) and the fixed sum."""
        values = [
            0 if i in skip else known[i] if known and i not in self._volatile else s.score(node)
            for i, s in enumerate(self.scores)
        ]
        fixed = sum(s.weight * v for s, v in zip(self.scores, values, strict=True) if s.normalize == "none")
        return (*values, fixed)


def _released(node: Any) -> Any:
    raise RuntimeError("a released binding's DRA claims were asked of (rebind it first)")


def _moves(name: str, ctx: EvalContext) -> bool:
    """Whether, for this pod now, the built-in's answers move with (nearly) every cluster change."""
    builtin = BUILTINS[name]
    return builtin.version is None or (builtin.moves is not None and bool(builtin.moves(ctx)))
