"""The evaluation context of one pod: the pod, the cluster it is placed in, and scratch space.

Built once per pod per scheduling cycle (kube-scheduler's CycleState plays this part): built-ins
that read the whole cluster keep their per-pod precomputation in ``scratch``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from rulesched.lang.schema import NodeView
from rulesched.model import Pod


class ClusterView(Protocol):
    """What cluster-wide built-ins may ask of the snapshot (implemented outside this package)."""

    def node_views(self) -> Iterable[NodeView]: ...

    def node_view(self, name: str) -> NodeView | None: ...

    def namespace_labels(self, namespace: str) -> Mapping[str, str]: ...


@dataclass
class EvalContext:
    pod: Pod
    cluster: ClusterView | None = None
    scratch: dict[Any, Any] = field(default_factory=dict)
