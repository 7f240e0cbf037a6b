"""Node use after a simulation, as every report shows it: which resources, which nodes, in what order.

Resources are cpu, memory and pods, then every other resource some pod requests (running or
pending; GPUs such as ``nvidia.com/gpu``, hugepages, ...), by name; ``ephemeral-storage`` is left
out, as it always was. A node's use of each is what its pods request against what it has
allocatable.

Big clusters are cut to their busiest nodes: a node's load is the highest share it has of any
resource shown (so a node whose GPUs are all taken is full, whatever its cpu), the busiest first,
ties in cluster order. By default every node is shown up to :data:`ALL_NODES_UP_TO` nodes, else
the :data:`BUSIEST_NODES` busiest; ``--nodes N`` shows the N busiest, ``--nodes 0`` every node.
Next stage: :mod:`rulesched.simulate.report` (table) and :mod:`rulesched.simulate.html` draw them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from rulesched.cluster.nodeinfo import NodeInfo
from rulesched.model import Pod

ALL_NODES_UP_TO = 50  # by default, clusters up to this size show every node
BUSIEST_NODES = 20  # and bigger ones their busiest nodes
BASE_RESOURCES = ("cpu", "memory", "pods")
_NOT_SHOWN = frozenset({*BASE_RESOURCES, "ephemeral-storage"})
_MILLI = 1000
_GIB = 2**30 * _MILLI  # memory is held in milli-bytes


def extended_resources(nodes: Iterable[NodeInfo], pending: Iterable[Pod]) -> tuple[str, ...]:
    """The resources beyond cpu, memory, pods (and ephemeral storage) that some pod requests:
    a running pod (its node's requests) or a pending one, placed or not. Sorted by name."""
    names: set[str] = set()
    for info in nodes:
        names.update(r for r, v in info.requested.items() if v > 0)
    for pod in pending:
        names.update(r for r, v in pod.requests.items() if v > 0)
    return tuple(sorted(names - _NOT_SHOWN))


@dataclass(frozen=True)
class Use:
    """One resource's use on one node: requested and allocatable (milli-units; pods counted)."""

    resource: str
    used: int
    total: int

    @property
    def fraction(self) -> float | None:
        """Requested over allocatable; None when nothing is allocatable."""
        return self.used / self.total if self.total else None

    @property
    def percent(self) -> str:
        fraction = self.fraction
        return "-" if fraction is None else f"{100 * fraction:.0f}%"

    def amounts(self, sep: str = "/") -> str:
        """``3/8`` (pods, GPUs), ``1.5/4 cores``, ``12.0/32.0 GiB``: what the share is of."""
        if self.resource == "pods":
            return f"{self.used}{sep}{self.total}"
        if self.resource == "memory" or self.resource.startswith("hugepages-"):
            return f"{self.used / _GIB:.1f}{sep}{self.total / _GIB:.1f} GiB"
        unit = " cores" if self.resource == "cpu" else ""
        return f"{self.used / _MILLI:g}{sep}{self.total / _MILLI:g}{unit}"


def uses(info: NodeInfo, resources: Sequence[str]) -> tuple[Use, ...]:
    """``info``'s use of each resource, in the order given."""
    alloc, req = info.allocatable, info.requested
    out = []
    for resource in resources:
        if resource == "pods":
            out.append(Use(resource, len(info.pods), alloc.get("pods", 0) // _MILLI))
        else:
            out.append(Use(resource, req.get(resource, 0), alloc.get(resource, 0)))
    return tuple(out)


def load(node_uses: Sequence[Use]) -> float:
    """The highest share of any resource (0 when nothing is allocatable)."""
    return max((u.fraction or 0.0 for u in node_uses), default=0.0)


@dataclass(frozen=True)
class NodeSelection:
    """The nodes a report shows, in the order it shows them, and their use of ``resources``."""

    resources: tuple[str, ...]
    rows: tuple[tuple[NodeInfo, tuple[Use, ...]], ...]
    total: int  # nodes in the cluster
    busiest: bool  # cut to the busiest (busiest first), else every node in cluster order

    @property
    def left_out(self) -> int:
        return self.total - len(self.rows)

    def note(self) -> str:
        """The line saying what was cut: ``20 busiest of 5000 nodes shown (...); --nodes 0 shows all``."""
        if not self.busiest:
            return ""
        what = ", ".join(self.resources)
        return (
            f"{len(self.rows)} busiest of {self.total} nodes shown (by the highest use of {what}); "
            f"{self.left_out} left out, --nodes 0 shows all"
        )


def select_nodes(nodes: Sequence[NodeInfo], resources: Sequence[str], limit: int | None = None) -> NodeSelection:
    """The nodes to show: every one when ``limit`` is 0 or not below the node count, else the
    ``limit`` busiest (``None``: the default, see the module docstring)."""
    if limit is None:
        limit = 0 if len(nodes) <= ALL_NODES_UP_TO else BUSIEST_NODES
    measured = [(info, uses(info, resources)) for info in nodes]
    if limit <= 0 or limit >= len(nodes):
        return NodeSelection(tuple(resources), tuple(measured), len(nodes), False)
    order = sorted(range(len(measured)), key=lambda i: -load(measured[i][1]))  # (stable: cluster order)
    return NodeSelection(tuple(resources), tuple(measured[i] for i in order[:limit]), len(nodes), True)
