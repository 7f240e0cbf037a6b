"""Why a group of pods does not fit, and what would make it fit: a PodGroup (either API), a Job's
or a Deployment's pods, or several pods given together.

The group is scheduled as it is, in a trial (:class:`rulesched.scheduler.trial.Trials`: the
scheduler's own group cycle, topology placements and workload-aware preemption included), and
what the trial found is the explanation: which members fit and where, the domain that came
closest (the topology placement with the most members), what the last members lack (their
reasons as codes, with the shortfall on their nearest node) and, for the closest domain, at least
how much more of each resource it would need for the rest.

The fixes are :mod:`rulesched.scheduler.fixes`' with the group in mind. One member that did not
fit stands for the rest (the members of a group share their template): each node proposes its
changes for it, and a change of one shape is made on as many nodes as the members still
without a place need (an empty node like N holds as many as fit it; untainting a node gives the
members its free room; evicting pods makes room for one), pod changes are made on every member
(``*``), and the gang's minimum may be lowered to the members that fit. Each candidate is then
tried on the whole group, which it fixes when the group is placed (a gang: its minimum bound; a
set of pods: every one of them).
Next stage: :func:`group_json` (explain's ``group_explanation``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rulesched.cluster.nodeinfo import NodeInfo
from rulesched.cluster.store import ClusterStore
from rulesched.lang import RuleSet, quantity_text
from rulesched.model import Pod, PriorityClass
from rulesched.model.groups import PodGroup, group_key
from rulesched.scheduler.changes import ALL, Change
from rulesched.scheduler.fix_candidates import (
    NodeFailure,
    families_of,
    nearness,
    node_options,
    per_node,
    rule_candidates,
)
from rulesched.scheduler.fixes import (
    CLUSTER,
    GROUP,
    MIXED,
    Candidate,
    FixBudget,
    FixSearch,
    search,
    shape,
    size,
)
from rulesched.scheduler.reasons import Reason
from rulesched.scheduler.trial import TrialOutcome, Trials
from rulesched.scheduler.why import explain_pod

GROUP_BUDGET = FixBudget(candidates=16, trials=14, fixes=5, nodes=60, per_kind=10)
SCORE_CANDIDATES = 2  # node scores whose removal is tried for a group of which some members fit
COMBINED = 2  # candidates a refuted one that fit more members is combined with


@dataclass(frozen=True)
class Domain:
    """One topology placement the group was tried in."""

    labels: Mapping[str, str]
    placed: int  # members that fit there
    message: str


@dataclass
class GroupExplanation:
    name: str  # "PodGroup ns/x", "Job ns/train", "3 pods"
    policy: str  # "gang minCount 4", "every pod"
    members: tuple[str, ...]  # pending members asked about
    needed: int  # members that must be placed (a gang's minimum less those already placed)
    before: int  # members already placed
    placed: bool  # the group fits as it is
    fit: dict[str, str] = field(default_factory=dict)  # member -> the node it fit on in the trial
    where: dict[str, int] = field(default_factory=dict)  # node -> members that fit there
    message: str = ""
    domains: tuple[Domain, ...] = ()
    closest: Domain | None = None
    closest_lacks: dict[str, int] = field(default_factory=dict)  # resource -> at least this much more (milli)
    lacking: dict[str, tuple[Reason, ...]] = field(default_factory=dict)  # member without a place -> why
    fixes: FixSearch | None = None


def members_of(pods: Sequence[Pod], groups: Sequence[PodGroup], pod: Pod) -> list[Pod]:
    """The pending pods of ``pod``'s group (its root's tree, for the workload API), itself first."""
    key = group_key(pod)
    if key is None:
        return [pod]
    parents = {g.key: g.parent for g in groups}

    def root(k: str) -> str:
        seen = set()
        while parents.get(k) and k not in seen:
            seen.add(k)
            k = parents[k]
        return k

    top = root(key)
    others = [p for p in pods if p.key != pod.key and (k := group_key(p)) is not None and root(k) == top]
    return [pod, *others]


def explain_group(
    members: Sequence[Pod],
    groups: Sequence[PodGroup],
    store: ClusterStore,
    rules: RuleSet,
    name: str,
    classes: Sequence[PriorityClass] = (),
    budget: FixBudget = GROUP_BUDGET,
    fixes: bool = True,
    other_pending: Sequence[Pod] = (),
) -> GroupExplanation:
    """``members`` (pending) with their ``groups`` on ``store`` (changed by the trials and put
    back), under ``rules``; ``other_pending``: the pending pods a rule fix's diff asks about."""
    trials = Trials(store, rules)
    roots = [g for g in groups if not g.parent]
    gang = next((g for g in roots if any(group_key(m) == g.key or _in_tree(groups, m, g) for m in members)), None)
    before = _placed_members(store, gang, groups) if gang is not None else 0
    if gang is not None and gang.gang:
        needed = max(0, gang.min_member - before)
        policy = f"gang {'minGroupCount' if gang.composite else 'minCount'} {gang.min_member}"
    else:
        needed, policy = len(members), "every pod"
    placed_by = _placed_by(members, gang)
    baseline = trials.run(members, groups)
    out = GroupExplanation(name, policy, tuple(m.key for m in members), needed, before, placed_by(baseline))
    _read(out, members, baseline, store)
    if out.placed or not fixes:
        return out
    unplaced = [m for m in members if m.key not in out.fit]
    standing = unplaced[0] if unplaced else members[0]
    missing = max(1, needed - len(out.fit)) if gang is not None and gang.gang else max(1, len(unplaced))
    # The member standing for the rest is explained, and its candidates made, with the members
    # that fit in the trial on their nodes (the room they take is not the rest's)
    fitted = [dataclasses.replace(m, node_name=out.fit[m.key]) for m in members if m.key in out.fit]
    for placed in fitted:
        store.add_pod(placed)
    try:
        explained = explain_pod(standing, store.snapshot(), rules)
        failures = {
            node: [NodeFailure(f.rule, f.reasons, f.unresolvable) for f in fails]
            for node, fails in explained.failures.items()
        }
        made = group_candidates(
            standing,
            missing,
            store.node_view,
            failures,
            set(explained.resource_rules),
            classes,
            budget,
            dict(out.closest.labels) if out.closest is not None else {},
            {m.key for m in members},
        )
    finally:
        for placed in fitted:
            store.remove_pod(placed.key)
    found = made.found
    if out.closest is not None:  # nodes like one of the closest domain's, there
        grown = _grow_closest(out, standing, store, members)
        if grown is not None:
            found.append(grown)
    if gang is not None and gang.gang:
        # the minimum lowered to the members that fit (in one domain, the closest's), alone or
        # with a change on one node that holds more of them
        most = max(len(out.fit), out.closest.placed if out.closest is not None else 0)
        for extra, holds in [(None, 0), *made.partial[:COMBINED]]:
            have = most + holds + before
            if 0 < have < gang.min_member:
                lower = Candidate(GROUP, (_lower(gang, have),), 0, gang.key)
                found.append(_together(extra, lower, members) if extra is not None else _sized(lower, members))
    # the rules: a preempt rule vetoing the evictions, and, when some members fit and others
    # not, the scores that placed the first ones
    evicts = any(candidate.changes and all(c.op == "evict" for c in candidate.changes) for candidate in found)
    preempts = evicts and standing.preemption_policy != "Never"
    found += rule_candidates(rules, preempt=preempts, scores=SCORE_CANDIDATES if out.fit else 0)
    found.sort(key=lambda c: (c.size, len(c.changes)))
    keys = {m.key for m in members}
    others = [p for p in other_pending if p.key not in keys]
    originals = found[: budget.candidates]
    first_round = {c.key for c in originals}

    def follow(candidate: Candidate, outcome: TrialOutcome) -> list[Candidate]:
        """What a refuted candidate got part of the way to: with a gang's minimum lowered to the
        members it fit; with a lower request (the next node's free amount); when it fit more
        than the cluster as it is, with the smallest changes on one node and the next smallest
        candidates (a pod change here, a node there)."""
        if candidate.key not in first_round:
            return []  # (a follow-up's own are not followed: the budget goes to the first round)
        fit = outcome.fitting(keys)
        more = []
        lowers = any(c.op == "set-min-count" for c in candidate.changes)
        if gang is not None and gang.gang and not lowers and 0 < fit + before < gang.min_member:
            more.append(_together(candidate, Candidate(GROUP, (_lower(gang, fit + before),), 0), members))
        less = _less(candidate, made.amounts)
        if less is not None:
            more.append(_sized(less, members))
        if fit > len(out.fit):
            requests = {c.key for c in candidate.changes if c.op == "set-request"}
            fitting = [
                d
                for d in [*(c for c, _ in made.partial), *originals]
                if d is not candidate
                and not set(d.changes) & set(candidate.changes)
                and not any(c.op == "set-min-count" or (c.op == "set-request" and c.key in requests) for c in d.changes)
            ]
            more += [_together(candidate, d, members) for d in fitting[:COMBINED]]
        return more

    out.fixes = search(
        members,
        trials,
        found[: budget.candidates],
        budget,
        groups,
        other_pending=others,
        placed=placed_by,
        baseline=baseline,
        follow_up=follow,
    )
    if not out.fixes.fixes:
        out.fixes.unfixable = [f"{rule} on {n} node(s)" for rule, n in _hard(failures).items()]
    return out


def _lower(gang: PodGroup, count: int) -> Change:
    return Change("set-min-count", "PodGroup", gang.key, count=count, amount=gang.min_member - count)


def _sized(candidate: Candidate, members: Sequence[Pod]) -> Candidate:
    return dataclasses.replace(candidate, size=size(candidate.changes, members))


def _less(candidate: Candidate, amounts: Mapping[str, Sequence[int]]) -> Candidate | None:
    """``candidate`` with its lowered requests lowered further, to the next amount a node has
    free (None: none lower)."""
    changes = []
    for c in candidate.changes:
        if c.op == "set-request":
            lower = [a for a in amounts.get(c.key, ()) if a < c.amount]
            if lower:
                c = dataclasses.replace(c, amount=max(lower))
        changes.append(c)
    return None if tuple(changes) == candidate.changes else dataclasses.replace(candidate, changes=tuple(changes))


def _together(first: Candidate, second: Candidate, members: Sequence[Pod]) -> Candidate:
    changes = tuple(dict.fromkeys((*first.changes, *second.changes)))
    where = first.where if first.where == second.where else MIXED
    return Candidate(where, changes, size(changes, members), first.node)


def _in_tree(groups: Sequence[PodGroup], pod: Pod, root: PodGroup) -> bool:
    key = group_key(pod)
    parents = {g.key: g.parent for g in groups}
    while key:
        if key == root.key:
            return True
        key = parents.get(key, "")
    return False


def _placed_members(store: ClusterStore, gang: PodGroup, groups: Sequence[PodGroup]) -> int:
    keys = {g.key for g in groups if g.key == gang.key or g.parent == gang.key}
    return sum(1 for p in store.pods() if group_key(p) in keys)


def _placed_by(members: Sequence[Pod], gang: PodGroup | None) -> Callable[[TrialOutcome], bool]:
    """Whether a trial placed the group: its root group placed by an attempt (a gang), or every
    pod bound (pods without a group, or a basic group)."""
    keys = [m.key for m in members]
    if gang is not None and gang.gang:
        return lambda outcome: gang.key in outcome.placed_groups
    return lambda outcome: outcome.all_placed(keys)


def _read(out: GroupExplanation, members: Sequence[Pod], trial: TrialOutcome, store: ClusterStore) -> None:
    """What the baseline trial found: where members fit (bound, or fit and given back with their
    group), the domains tried, the closest one, what the rest lack."""
    for m in members:
        node = trial.placed.get(m.key)
        last = trial.last.get(m.key)
        if node is None and last is not None and last.fitted is not None:
            node = last.fitted
        if node is not None:
            out.fit[m.key] = node
            out.where[node] = out.where.get(node, 0) + 1
        elif last is not None:
            out.lacking[m.key] = last.reason_codes()
    last_results = [trial.last[m.key] for m in members if m.key in trial.last]
    if last_results:
        out.message = next((r.message for r in last_results if r.node is None), "")
    details = [r.group_detail for r in last_results if r.group_detail is not None]
    if details:
        detail = details[0]
        out.domains = tuple(Domain(dict(t.domain), t.placed, t.message) for t in detail.trials)
        tried = [d for d in out.domains if d.labels]
        if tried:
            out.closest = max(tried, key=lambda d: d.placed)
            out.closest_lacks = _domain_lacks(out, members, store)
    for outcome in trial.groups.values():
        if outcome.message and not out.message:
            out.message = outcome.message


def _grow_closest(out: GroupExplanation, pod: Pod, store: ClusterStore, members: Sequence[Pod]) -> Candidate | None:
    """Nodes like the biggest of the closest domain's (they share its labels, so its domain),
    as many as the members it did not hold need."""
    assert out.closest is not None
    labels = out.closest.labels
    there = [n for n in store.nodes if all(n.labels.get(k) == v for k, v in labels.items()) and per_node(pod, n)]
    if not there:
        return None
    template = max(there, key=lambda n: (per_node(pod, n), n.name))
    missing = max(1, out.needed - out.closest.placed)
    added = Change("add-nodes", "Node", template.name, count=-(-missing // per_node(pod, template)))
    return Candidate(CLUSTER, (added,), size((added,), members), template.name)


def _domain_lacks(out: GroupExplanation, members: Sequence[Pod], store: ClusterStore) -> dict[str, int]:
    """At least how much more of each resource the closest domain needs for the members it did
    not hold: their requests less what its nodes have free beyond the ones it held (a lower
    bound: free room split over nodes may still not hold a member)."""
    assert out.closest is not None
    labels = out.closest.labels
    nodes = [n for n in store.nodes if all(n.labels.get(k) == v for k, v in labels.items())]
    ordered = sorted(members, key=lambda m: m.key in out.fit, reverse=True)
    held, rest = ordered[: out.closest.placed], ordered[out.closest.placed : out.needed]
    lacks: dict[str, int] = {}
    resources = {r for m in rest for r, v in m.requests.items() if v > 0}
    for r in resources:
        free = sum(max(0, n.free.get(r, 0)) for n in nodes) - sum(m.requests.get(r, 0) for m in held)
        want = sum(m.requests.get(r, 0) for m in rest)
        if want > free:
            lacks[r] = want - max(0, free)
    return lacks


def _hard(failures: Mapping[str, Sequence[NodeFailure]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for fails in failures.values():
        for f in fails:
            counts[f.rule] = counts.get(f.rule, 0) + 1
    return dict(sorted(counts.items(), key=lambda i: -i[1]))


# --- candidates -------------------------------------------------------------------------------------


@dataclass
class GroupCandidates:
    found: list[Candidate]
    partial: list[tuple[Candidate, int]]  # changes on one node too few for the members, and how many it holds
    amounts: dict[str, list[int]]  # resource -> the amounts a request may be lowered to, highest first


def group_candidates(
    pod: Pod,
    missing: int,
    nodes: Callable[[str], NodeInfo | None],
    failures: Mapping[str, Sequence[NodeFailure]],
    resource_rules: set[str],
    classes: Sequence[PriorityClass],
    budget: FixBudget,
    domain: Mapping[str, str],
    members: set[str] = frozenset(),  # type: ignore[assignment]
) -> GroupCandidates:
    """Candidates for ``missing`` more members like ``pod``: each shape of change (see the
    module docstring) on as many of its nodes as they need, nearest first; nodes in ``domain``
    (the closest topology domain) first; a pod change the least of its kind (a request lowered
    the least). And, for the follow-ups, the changes on one node too few to be one, and the
    amounts a request may be lowered to."""
    ranked: list[tuple[bool, float, str, NodeInfo, dict[str, list[Any]]]] = []
    for name, fails in failures.items():
        info = nodes(name)
        if info is None:
            continue
        families = families_of(pod, info, fails, resource_rules)
        if families is None:
            continue
        outside = bool(domain) and not all(info.labels.get(k) == v for k, v in domain.items())
        ranked.append((outside, nearness(pod, info, families), name, info, families))
    ranked.sort(key=lambda r: (r[0], r[1], r[2]))
    by_shape: dict[tuple[Any, ...], list[tuple[Candidate, int]]] = {}
    kinds: dict[frozenset[str], int] = {}
    for _, _, _, info, families in ranked:
        kind = frozenset(families)
        if kinds.get(kind, 0) >= budget.per_kind:
            continue
        kinds[kind] = kinds.get(kind, 0) + 1
        for c in node_options(pod, [pod], info, families, classes, members):
            if any(ch.op == "set-priority" for ch in c.changes):
                continue  # (a group's members share its priority: the group's, not one member's)
            if any(ch.op == "evict" and ch.name in members for ch in c.changes):
                continue  # (a member that fit is not evicted for another)
            by_shape.setdefault(shape(c), []).append((c, _holds(pod, info, c)))
    out = []
    partial: list[tuple[Candidate, int]] = []
    amounts: dict[str, set[int]] = {}
    cover = _cover(pod, missing, nodes, by_shape)
    if cover is not None:
        out.append(cover)
    for proposals in by_shape.values():
        if all(ch.kind != "Node" and ch.op != "evict" for ch in proposals[0][0].changes):
            proposals = sorted(proposals, key=lambda p: size(p[0].changes, [pod]))  # (the least change first)
            for c, _ in proposals:
                for ch in c.changes:
                    if ch.op == "set-request":
                        amounts.setdefault(ch.key, set()).add(ch.amount)
        changes: list[Change] = []
        held = 0
        for candidate, holds in proposals:
            for ch in candidate.changes:
                if ch.op == "add-nodes":
                    per = max(1, per_node(pod, info_of(nodes, ch.name)))
                    ch = Change("add-nodes", "Node", ch.name, count=-(-missing // per))
                    holds = missing
                changes.append(_for_all(ch))
            held += holds
            if held >= missing or all(ch.kind != "Node" and ch.op != "evict" for ch in candidate.changes):
                break
        if held < missing and any(ch.kind == "Node" or ch.op == "evict" for ch in changes):
            first, holds = proposals[0]
            mine = tuple(_for_all(ch) for ch in first.changes)
            partial.append((Candidate(first.where, mine, size(mine, [pod]), first.node), holds))
            continue  # (not enough nodes of this shape for the members)
        unique = tuple(dict.fromkeys(changes))
        where = proposals[0][0].where
        out.append(Candidate(where, unique, size(unique, [pod]), proposals[0][0].node))
    partial.sort(key=lambda p: p[0].size)
    return GroupCandidates(out, partial, {r: sorted(a, reverse=True) for r, a in amounts.items()})


def _for_all(change: Change) -> Change:
    """A pod change made on every member (they share their template)."""
    return dataclasses.replace(change, name=ALL) if change.kind == "Pod" and change.op != "evict" else change


def _cover(
    pod: Pod,
    missing: int,
    nodes: Callable[[str], NodeInfo | None],
    by_shape: Mapping[tuple[Any, ...], list[tuple[Candidate, int]]],
) -> Candidate | None:
    """Room for ``missing`` members from the cheapest cluster changes per member held, node by
    node (each node once), and nodes like the best template for what is still missing."""
    options = [
        (candidate.size / holds, candidate, holds)
        for proposals in by_shape.values()
        for candidate, holds in proposals
        if candidate.where == CLUSTER
        and holds > 0
        and all(c.kind == "Node" or c.op == "evict" for c in candidate.changes)
    ]
    options.sort(key=lambda o: (o[0], o[1].node))
    changes: list[Change] = []
    used: set[str] = set()
    held = 0
    for _, candidate, holds in options:
        if held >= missing:
            break
        if candidate.node in used:
            continue
        used.add(candidate.node)
        changes += candidate.changes
        held += holds
    if held < missing:
        templates = [
            c.changes[-1] for proposals in by_shape.values() for c, _ in proposals if c.changes[-1].op == "add-nodes"
        ]
        if not templates:
            return None
        template = templates[0]
        per = max(1, per_node(pod, info_of(nodes, template.name)))
        changes.append(Change("add-nodes", "Node", template.name, count=-(-(missing - held) // per)))
    if len(changes) < 2:
        return None  # (one change: a shape's own candidate already)
    unique = tuple(dict.fromkeys(changes))
    return Candidate(CLUSTER, unique, size(unique, [pod]), "")


def info_of(nodes: Callable[[str], NodeInfo | None], name: str) -> NodeInfo:
    info = nodes(name)
    assert info is not None
    return info


def _holds(pod: Pod, node: NodeInfo, candidate: Candidate) -> int:
    """How many members like ``pod`` the node holds once ``candidate``'s changes are made."""
    ops = {c.op for c in candidate.changes}
    if "add-nodes" in ops:
        return 0  # (counted by the copies)
    if "evict" in ops or "set-request" in ops:
        return 1
    room = [max(0, node.free.get(r, 0)) // want for r, want in pod.requests.items() if want > 0]
    slots = node.allocatable.get("pods", 0) // 1000 - len(node.pods)
    return max(0, min([*room, slots]))


# --- JSON -------------------------------------------------------------------------------------------


def group_json(g: GroupExplanation) -> dict[str, Any]:
    from rulesched.scheduler.fixes import fixes_json

    closest = g.closest
    return {
        "group": g.name,
        "policy": g.policy,
        "members": list(g.members),
        "needed": g.needed,
        "before": g.before,
        "placed": g.placed,
        "fit": len(g.fit),
        "where": dict(sorted(g.where.items(), key=lambda i: (-i[1], i[0]))),
        "message": g.message,
        "domains": [{"domain": dict(d.labels), "placed": d.placed, "message": d.message} for d in g.domains],
        "closest": None
        if closest is None
        else {
            "domain": dict(closest.labels),
            "placed": closest.placed,
            "lacks": {r: quantity_text(v) for r, v in sorted(g.closest_lacks.items())},
        },
        "lacking": {pod: [r.summary_json() for r in reasons] for pod, reasons in g.lacking.items()},
        "fixes": None if g.fixes is None else fixes_json(g.fixes),
    }
