"""What evicting pods frees of devices, for preemption.

kube-scheduler 1.37 frees nothing: its DynamicResources plugin has no PreFilter extensions
(``PreFilterExtensions`` returns nil) and every Filter failure is UnschedulableAndUnresolvable, so
a pod that needs devices never preempts for them (the website's DRA page lists it under
"Limitations"). KEP-5690 ("DRA: preemption", deferred from 1.37 to 1.38, gate
``DRAPreemption``) gives the plugin ``RemovePod``/``AddPod``: a candidate victim taken off a node
in preemption's dry run releases the claims *reserved only for victims* (every ``reservedFor``
entry a pod among the victims or already terminating; a claim shared with a surviving pod stays),
and only claims whose devices are all local to that node (published with the slice's or
device's ``nodeName``): network-attached devices and PodGroup reservations are left alone.
rulesched does the same here:

- :func:`releasable` picks those claims;
- the DynamicResources filter (:class:`rulesched.semantics.dra_pod.PodClaims`) allocates in the
  dry run with their devices, shares, capacity and counters given back;
- a node where allocation failed is Unschedulable (preemption may help) when such a claim held by
  the node's pods exists there, and UnschedulableAndUnresolvable otherwise.

KEP-5690's settling, in part: a pod nominated to a node after its preemption has its claims
still to allocate allocated first there whenever a pod of lower or equal priority is checked with
the node's nominated pods (:class:`rulesched.scheduler.nominator.ReservedCheck`; its AddPod, with
the allocation worked out again rather than recorded), so the devices it freed are not taken from
it; and the scheduler waits for the victims' claims to be deallocated before the preemptor
preempts again (:func:`unsettled`). Unlike the KEP, the victims' claims are not subtracted while
they are still allocated in that check (a stricter check until the controller catches up).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

from rulesched.model import Pod
from rulesched.model.dra import ResourceClaim
from rulesched.semantics.dra_claims import claim_keys, consumer_uid
from rulesched.semantics.dra_devices import Candidate, DeviceID


def local_devices(node_name: str, candidates: Sequence[Candidate]) -> frozenset[DeviceID]:
    """The devices among ``candidates`` (a node's) published for that node by name: the
    slice's ``nodeName`` or, with per-device node selection, the device's."""
    out = []
    for cand in candidates:
        named = cand.device.node_name if cand.slice.per_device_node_selection else cand.slice.node_name
        if named == node_name:
            out.append(cand.id)
    return frozenset(out)


def releasable(
    claims: Mapping[str, ResourceClaim],
    holders: Iterable[Pod],
    gone: Collection[str],
    local: Callable[[DeviceID], bool],
    keep: Collection[str] = (),
) -> list[ResourceClaim]:
    """The claims of ``holders`` (pods taken off a node) that their going frees: allocated,
    reserved for pods only, every one of them in ``gone`` (consumer uids: the pods taken off, and
    the node's terminating pods), every device ``local`` to the node; ``keep`` (keys, the
    preemptor's own claims) are never released. In the order the pods name them."""
    out: list[ResourceClaim] = []
    seen: set[str] = set(keep)
    for pod in holders:
        for key in claim_keys(pod):
            if key in seen:
                continue
            seen.add(key)
            claim = claims.get(key)
            if claim is None or claim.allocation is None or not claim.reserved_for:
                continue
            if not all(c.resource == "pods" and c.uid in gone for c in claim.reserved_for):
                continue
            if all(local(r.device_id) for r in claim.allocation.devices):
                out.append(claim)
    return out


def gone_uids(taken_off: Iterable[Pod], on_node: Iterable[Pod]) -> frozenset[str]:
    """The consumer uids that count as gone from a node: the pods taken off it, and its pods
    being deleted (KEP-5690: "or already terminating")."""
    return frozenset([*(consumer_uid(p) for p in taken_off), *(consumer_uid(p) for p in on_node if p.deleting)])


def unsettled(claims: Mapping[str, ResourceClaim], keys: Iterable[str], victims: Collection[str]) -> list[str]:
    """Of the claims (``keys``) an earlier preemption released, those still allocated and held
    by nobody but its victims (``victims``: their consumer uids) or nobody at all: the
    resourceclaim controller has not deallocated them yet (KEP-5690's settling window, t1 to
    t3). A claim another pod has joined since is settled: it is not going to be freed."""
    out = []
    for key in keys:
        claim = claims.get(key)
        if claim is None or claim.allocation is None:
            continue
        if all(c.uid in victims for c in claim.reserved_for):
            out.append(key)
    return out


def freed_by(
    claims: Mapping[str, ResourceClaim], victims: Sequence[Pod], preemptor: Pod
) -> tuple[list[str], frozenset[str]]:
    """The claims evicting ``victims`` frees (held by nobody else; the preemptor's own aside),
    and the victims' consumer uids: what :func:`unsettled` waits on."""
    gone = gone_uids(victims, ())
    freed = releasable(claims, victims, gone, lambda _: True, claim_keys(preemptor))
    return [c.key for c in freed], gone
