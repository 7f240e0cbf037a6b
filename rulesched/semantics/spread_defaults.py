"""System default topology spreading: the soft constraints kube-scheduler gives a pod that has
no topology spread constraints of its own (PodTopologySpread with ``defaultingType: System``).

The constraints are fixed — hostname with maxSkew 3, then zone with maxSkew 5, both
ScheduleAnyway — and their selector is the pod's *default selector* (upstream's
``helper.DefaultSelector``): the labels of every Service in the pod's namespace whose selector
matches the pod, merged, plus the selector of the pod's controlling ReplicaSet, StatefulSet or
ReplicationController when the cluster holds it. A pod nothing selects that way (no such
Service, no known controller) gets no default constraints and PodTopologySpread skips it.

The owner is looked up by kind and name; upstream also requires its apiVersion to be apps/v1
(v1 for a ReplicationController), which every owner reference a current API server writes has.
Next stage: :mod:`rulesched.semantics.spreading` makes the constraints of these, which
:mod:`rulesched.lang.builtins.spreading` scores with.
"""

from __future__ import annotations

from rulesched.model import LabelSelector, LabelSelectorRequirement, Pod
from rulesched.model.workloads import CONTROLLER_KINDS, Workloads
from rulesched.semantics.matching import subset

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
# (topology key, maxSkew), in upstream's order (scores add up per constraint in this order)
SYSTEM_DEFAULTS: tuple[tuple[str, int], ...] = ((HOSTNAME, 3), (ZONE, 5))


def default_selector(pod: Pod, workloads: Workloads) -> LabelSelector | None:
    """The union of the selectors of the Services and the controller selecting ``pod``; None
    when it is empty (nothing to spread by)."""
    if not workloads:
        return None
    labels: dict[str, str] = {}
    for service in workloads.services_in(pod.namespace):
        # (services' label maps are merged, a later one winning a key, as labels.Merge does;
        # they all select the pod, so they agree wherever they overlap)
        if service.selector and subset(service.selector, pod.labels):
            labels.update(service.selector)
    extra: tuple[LabelSelectorRequirement, ...] = ()
    kind, _, name = pod.owner.partition("/")
    if name and kind in CONTROLLER_KINDS:
        controller = workloads.controller(kind, pod.namespace, name)
        selector = controller.selector if controller is not None else None
        if selector is not None:
            if kind == "ReplicationController":  # a label map, merged with the services' labels
                labels.update(selector.match_labels)
            else:  # a label selector: its requirements are added to the services' ones
                extra = (
                    *(LabelSelectorRequirement(k, "In", (v,)) for k, v in selector.match_labels),
                    *selector.match_expressions,
                )
    if not labels and not extra:
        return None
    return LabelSelector(tuple(sorted(labels.items())), extra)
