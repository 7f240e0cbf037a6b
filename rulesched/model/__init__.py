"""The object model shared by every stage: quantities, pods, nodes and their parts.

Values here are plain frozen dataclasses built from Kubernetes objects by
:mod:`rulesched.model.decode`; nothing here knows about the rules language or the API client.
Next stage: :mod:`rulesched.cluster` (store and snapshot), and the rules see these values through
:mod:`rulesched.lang.schema`.
"""

from rulesched.model.objects import (
    ALWAYS_ALLOW,
    DISRUPTION_TARGET,
    PREEMPTED_CONDITION,
    PREEMPTION_BY_SCHEDULER,
    ContainerPort,
    LabelSelector,
    LabelSelectorRequirement,
    Node,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Pod,
    PodAffinityTerm,
    PodDisruptionBudget,
    PreferredSchedulingTerm,
    PriorityClass,
    Taint,
    Toleration,
    TopologySpreadConstraint,
    WeightedPodAffinityTerm,
)
from rulesched.model.quantity import QuantityError, format_quantity, parse_quantity

__all__ = [
    "ALWAYS_ALLOW",
    "DISRUPTION_TARGET",
    "PREEMPTED_CONDITION",
    "PREEMPTION_BY_SCHEDULER",
    "ContainerPort",
    "LabelSelector",
    "LabelSelectorRequirement",
    "Node",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "Pod",
    "PodAffinityTerm",
    "PodDisruptionBudget",
    "PreferredSchedulingTerm",
    "PriorityClass",
    "QuantityError",
    "Taint",
    "Toleration",
    "TopologySpreadConstraint",
    "WeightedPodAffinityTerm",
    "format_quantity",
    "parse_quantity",
]
