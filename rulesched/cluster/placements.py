"""Where the store's pods are: the node of each pod on a known node, the pods bound to a node the
store does not know (yet), the pods that carry inter-pod (anti-)affinity terms (the running pods
whose terms the affinity built-ins read), and how many placed pods mount each claim
(VolumeRestrictions' ReadWriteOncePod check).

The affinity pods and the claim users are copied on write while a snapshot holds them
(:mod:`rulesched.cluster.cow`); the node of each pod and the orphans are the store's alone.
Next stage: :mod:`rulesched.cluster.store` keeps them in step with the node infos.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from rulesched.cluster.cow import CopyOnWrite
from rulesched.model import Pod
from rulesched.semantics.affinity import has_affinity


class Placements:
    __slots__ = ("_cow", "where", "orphans", "affinity", "claim_users")

    def __init__(self, cow: CopyOnWrite[Any]) -> None:
        self._cow = cow
        self.where: dict[str, str] = {}  # pod key -> node name, for pods on known nodes
        self.orphans: dict[str, Pod] = {}  # pod key -> pod bound to a node not (or no longer) known
        self.affinity: dict[str, tuple[Pod, str]] = {}  # pod key -> (pod, node), pods with terms
        self.claim_users: Counter[str] = Counter()  # namespace/claim -> placed pods mounting it

    def placed(self, pod: Pod, node_name: str) -> None:
        """The pod is now on the node."""
        key = pod.key
        self.where[key] = node_name
        if has_affinity(pod):
            if self._cow.must_copy("affinity"):
                self.affinity = dict(self.affinity)
            self.affinity[key] = (pod, node_name)
        if pod.volumes:
            self._count_claims(pod, 1)

    def taken_off(self, key: str, pod: Pod | None) -> None:
        """The pod (None: not found on its node) is no longer on the node it was placed on."""
        if pod is not None and pod.volumes:
            self._count_claims(pod, -1)
        if key in self.affinity:
            self._drop_affinity(key)

    def orphaned(self, pod: Pod) -> None:
        """The pod's node went away: it stays, using no node's resources, until it is deleted
        or the node comes back."""
        key = pod.key
        if pod.volumes:
            self._count_claims(pod, -1)
        self.where.pop(key, None)
        self.orphans[key] = pod
        if key in self.affinity:
            self._drop_affinity(key)

    def waiting_for(self, node_name: str) -> list[Pod]:
        """The orphans bound to ``node_name``, taken out of the orphans."""
        waiting = [p for p in self.orphans.values() if p.node_name == node_name]
        for pod in waiting:
            del self.orphans[pod.key]
        return waiting

    def _drop_affinity(self, key: str) -> None:
        if self._cow.must_copy("affinity"):
            self.affinity = dict(self.affinity)
        del self.affinity[key]

    def _count_claims(self, pod: Pod, sign: int) -> None:
        users = self.claim_users
        if self._cow.must_copy("claim_users"):
            users = self.claim_users = Counter(users)
        for claim in pod.claims:
            key = f"{pod.namespace}/{claim}"
            left = users[key] + sign
            if left > 0:
                users[key] = left
            else:
                del users[key]
