"""The second fit check of nodes holding nominated pods, for many nodes at once, as columns.

A pod's cycle checks each node that holds pods nominated there (of its priority or higher)
twice, as kube-scheduler's RunFilterPluginsWithNominatedPods does: without them (the walk), and
with them added. Done node by node, the second check puts the pods on a private overlay, binds
the pod to it afresh and evaluates every filter there. Where every filter reads a node only
through numbers the columns adjust (:func:`rulesched.engine.dryrun.node_local`: free and
requested resources, the pod count), adding the nominated pods is adding their requests and
their count, which :class:`rulesched.engine.dryrun.DryRunColumns` does (with no pod taken off);
so the nodes are checked in one column evaluation per filter.

Exactness as for the dry runs; besides, a node whose nominated pods could change more than
those numbers for this pod when added (host ports; required anti-affinity, which upstream's
InterPodAffinity AddPod counts; DRA claims), or whose failure's reasons or ``unresolvable``
clause the columns cannot give, is left to the caller's node-by-node check.
Next stage: :class:`rulesched.scheduler.nominator.ReservedCheck` keeps the answers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from rulesched.engine.arrays import Unsupported
from rulesched.engine.batch import columns_of
from rulesched.engine.columns import NodeColumns, Rows
from rulesched.engine.dryrun import (
    DryRunColumns,
    changing_filters,
    failing_reasons_at,
    held_counted,
    node_local,
    passing_as_is,
)
from rulesched.lang import BoundRules
from rulesched.model import Pod

LEFT: tuple[int, tuple[str, ...], bool] = (-2, (), False)  # a node left to the node-by-node check
# The reasons of a failing node when they were not asked (``held_failures`` without ``reasons``):
# (its first failing filter, NOT_ASKED, False); ``held_reasons`` asks them later.
NOT_ASKED: tuple[str, ...] = ("(reasons not asked)",)
_UNKNOWN = ("(reasons not given as columns)",)  # (a marker: such rows are LEFT)

# (filter index, its reasons, whether its unresolvable clause holds there); None: fits
HeldFailure = tuple[int, tuple[str, ...], bool] | None


def held_failures(
    bound: BoundRules,
    base: NodeColumns,
    nodes: Sequence[Any],
    rows: Rows,
    held: Sequence[Sequence[Pod]],
    fitting: bool = False,
    reasons: bool = True,
) -> list[HeldFailure]:
    """For each of ``nodes`` (row ``rows[i]`` of ``base``, as the snapshot has it) with the pods
    ``held[i]`` added: None where the pod passes every filter, else its first failing filter's
    index (in ``bound.filters``), that filter's reasons and whether its ``unresolvable`` clause
    holds there, as :meth:`BoundRules.first_failure` and ``status_of`` would give them on the
    node with those pods added; :data:`LEFT` where the columns cannot say. Raises Unsupported
    where they can say nothing (the rules read more than the columns adjust). ``fitting``: the
    pod passes every filter on each of ``nodes`` as it is, so only the filters that nominated
    pods added can change are asked (:func:`rulesched.engine.dryrun.changing_filters`: the
    others answer there as without them). Without ``reasons``, a failing node's answer is
    (its first failing filter, :data:`NOT_ASKED`, False): :func:`held_reasons` asks the rest."""
    out: list[HeldFailure] = [LEFT] * len(nodes)
    found = _held_columns(bound, base, nodes, rows, held)
    if found is None:
        return out
    cols, ours = found
    asked = changing_filters(bound) if fitting else None
    failed = np.full(len(ours), -1, dtype=np.intp)
    passing_as_is(bound, cols, np.arange(len(ours), dtype=np.intp), asked, failed=failed)
    for j, index in enumerate(failed.tolist()):
        if index < 0:
            out[ours[j]] = None
        elif not reasons:
            out[ours[j]] = (index, NOT_ASKED, False)
    if reasons:
        _ask_reasons(bound, cols, ours, failed, out)
    return out


def held_reasons(
    bound: BoundRules,
    base: NodeColumns,
    nodes: Sequence[Any],
    rows: Rows,
    held: Sequence[Sequence[Pod]],
    first: Sequence[int],
) -> list[HeldFailure]:
    """:func:`held_failures`' answers for nodes it found failing without asking why, each
    (as it is still) failing filter ``first[i]`` first with ``held[i]`` added: that filter's
    reasons and unresolvable clause are asked, no filter again; :data:`LEFT` where the columns
    cannot give them (or ``first[i]`` is negative)."""
    out: list[HeldFailure] = [LEFT] * len(nodes)
    found = _held_columns(bound, base, nodes, rows, held)
    if found is not None:
        cols, ours = found
        _ask_reasons(bound, cols, ours, np.array([first[i] for i in ours], dtype=np.intp), out)
    return out


def _held_columns(
    bound: BoundRules, base: NodeColumns, nodes: Sequence[Any], rows: Rows, held: Sequence[Sequence[Pod]]
) -> tuple[DryRunColumns, list[int]] | None:
    """The columns of those of ``nodes`` whose pods ``held`` the columns can add (as numbers:
    no host ports, no required anti-affinity, no DRA claims), with them added, and which nodes
    they are; None when there are none. Raises Unsupported when the rules are not node-local."""
    if not node_local(bound):
        raise Unsupported("not node-local")
    ours = [i for i, pods in enumerate(held) if all(held_counted(p) and not p.host_ports for p in pods)]
    if not ours:
        return None
    at = np.array(ours, dtype=np.intp)
    cols = DryRunColumns([nodes[i] for i in ours], base, rows[at], [()] * len(ours), [held[i] for i in ours])
    cols.with_held = True
    return cols, ours


def _ask_reasons(
    bound: BoundRules, cols: DryRunColumns, ours: list[int], failed: npt.NDArray[np.intp], out: list[HeldFailure]
) -> None:
    """For each row j of ``cols`` failing filter ``failed[j]`` first (>= 0): ``out[ours[j]]``
    becomes (that filter, its reasons, its unresolvable clause) where the columns can give
    them (else it is left as it is: :data:`LEFT`)."""
    whys = failing_reasons_at(bound, cols, np.arange(len(ours), dtype=np.intp), failed, _UNKNOWN)
    for index in sorted(set(failed[failed >= 0].tolist())):
        js = [j for j in np.flatnonzero(failed == index).tolist() if whys[j] is not _UNKNOWN]
        if not js:
            continue
        try:
            unresolvable = _unresolvable(bound, cols, index, np.array(js, dtype=np.intp)).tolist()
        except Unsupported:
            continue  # (LEFT)
        for j, holds in zip(js, unresolvable, strict=True):
            why = whys[j]
            assert why is not None
            out[ours[j]] = (index, why, bool(holds))


def _unresolvable(bound: BoundRules, cols: DryRunColumns, index: int, rows: Rows) -> Any:
    """Whether filter ``index``'s unresolvable clause holds on each row, as ``cols`` has it."""
    bodies = columns_of(bound)
    if bodies is None or not bodies.filter_unresolvable:
        raise Unsupported("unresolvable clauses not known")
    condition = bodies.filter_unresolvable[index]
    if condition is None:  # (the rule has none)
        return np.zeros(len(rows), dtype=bool)
    if not bodies.evaluator.supports(condition):
        raise Unsupported("unresolvable clause not vectorisable")
    return bodies.evaluator.filter(condition, bound.ctx, cols, rows)
