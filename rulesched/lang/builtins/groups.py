"""The group being placed, for gang rules: ``group.members``, ``group.min_count``, ``group.nodes``,
``group.domain``.

The parser reads ``group.FIELD`` as a call of the built-in ``group_FIELD()`` (and the printer
writes it back as written), so the checker, the compiler, the reference interpreter and the
cost bound treat them as the context built-ins they are. ``members`` and ``min_count`` come
from the pod itself (``Pod.gang``, set by :mod:`rulesched.scheduler.gang` for the attempt: 0 for a
pod of no group), so classes of pods are keyed by them and guards may read them. ``nodes`` are
the nodes holding the group's placed members (bound before, or placed earlier in this attempt,
which the attempt's snapshot holds), each once, in the cluster's node order; its answer moves
with every placement, so rules reading it are evaluated afresh for each member and node.
``domain`` is the topology domain the attempt is trying (``Pod.domain``: label key -> value, one
entry per level of the group's topology constraints, KEP-5732; empty otherwise), set for each
placement the attempt tries (:mod:`rulesched.scheduler.workloads`); the default rules keep the
members in it (filter PodGroupTopology).
"""

from __future__ import annotations

from typing import Any

from rulesched.model.groups import group_key

GROUP_FIELDS = ("members", "min_count", "nodes", "domain")
GROUP_VARIABLE = "group"
_SCRATCH = "group.nodes"


def builtin_name(field: str) -> str:
    return f"group_{field}"


def group_members(ctx: Any) -> int:
    return int(ctx.pod.gang[1])


def group_min_count(ctx: Any) -> int:
    return int(ctx.pod.gang[0])


def group_domain(ctx: Any) -> Any:
    return ctx.pod.domain


def group_nodes(ctx: Any) -> tuple[Any, ...]:
    """The nodes of the group's placed members (computed once per pod per cycle)."""
    found = ctx.scratch.get(_SCRATCH)
    if found is not None:
        return found  # type: ignore[no-any-return]
    key = group_key(ctx.pod)
    nodes: tuple[Any, ...] = ()
    if key is not None and ctx.cluster is not None:
        me = ctx.pod.key
        nodes = tuple(
            info for info in ctx.cluster.node_views() if any(p.key != me and group_key(p) == key for p in info.pods)
        )
    ctx.scratch[_SCRATCH] = nodes
    return nodes


def steady(ctx: Any) -> object:
    """The version of members and min_count: they depend on the pod's fields alone."""
    return 0
