"""kube-scheduler's DynamicResources plugin tests that apply to rulesched, ported.

Source: pkg/scheduler/framework/plugins/dynamicresources/dynamicresources_test.go at v1.37.2,
testPlugin's table (each test names its case and line). Their fixtures are rebuilt here with the
same names and values: node ``worker``, driver ``some-driver``, the pod ``default/my-pod`` (uid
1234) with claim entry ``my-resource``, its claim ``my-pod-my-resource`` with one request
``req-1`` of class ``my-resource-class`` (a class without selectors), the slice of ``worker``
with device ``instance-1``. What is compared is the plugin's verdicts for the extension points
rulesched has (PreFilter's status, Filter's per node, what Reserve allocates and reserves, and
what PostFilter deallocates or deletes): the fake clientset's writes of PreBind and the
PodGroup and binding-condition cases are not ported (see docs/dra.md, "Not done yet"); of the
extended-resource cases, the two whose earlier claim PostFilter deletes (the others are
tests/test_dra_extended.py's and tests/test_run_dra.py's, end to end).
"""

from __future__ import annotations

import dataclasses
from types import MappingProxyType

from rulesched.cluster.store import ClusterStore
from rulesched.model import Node, NodeSelectorRequirement, NodeSelectorTerm, Pod
from rulesched.model.dra import (
    Allocation,
    ClaimSpec,
    Consumer,
    Device,
    DeviceClass,
    DeviceRequest,
    DeviceResult,
    DeviceTaint,
    DraState,
    ExactRequest,
    ResourceClaim,
    ResourceSlice,
)
from rulesched.model.objects import PodClaim
from rulesched.semantics.cel import CelCache
from rulesched.semantics.dra_devices import allocated_state
from rulesched.semantics.dra_extended import claim_name
from rulesched.semantics.dra_pod import CANNOT_ALLOCATE, NOT_AVAILABLE, PodClaims, pod_claims

NODE = "worker"
DRIVER = "some-driver"
CLAIM = "my-pod-my-resource"
CLASS = "my-resource-class"
WORKER = Node(NODE, labels=MappingProxyType({"kubernetes.io/hostname": NODE}))
DEVICE_CLASS = DeviceClass(CLASS)
WORKER_SLICE = ResourceSlice(f"{NODE}-{DRIVER}", DRIVER, NODE, node_name=NODE, devices=(Device("instance-1"),))
POD_WITH_CLAIM_NAME = Pod("my-pod", uid="1234", resource_claims=(PodClaim("my-resource", claim_name=CLAIM),))
POD_WITH_CLAIM_TEMPLATE = Pod("my-pod", uid="1234", resource_claims=(PodClaim("my-resource", template_name=CLAIM),))
POD_WITH_CLAIM_TEMPLATE_IN_STATUS = Pod(
    "my-pod", uid="1234", resource_claims=(PodClaim("my-resource", template_name=CLAIM, generated=CLAIM),)
)
LOCAL = (NodeSelectorTerm(match_fields=(NodeSelectorRequirement("metadata.name", "In", (NODE,)),)),)
ALLOCATION = Allocation((DeviceResult("req-1", DRIVER, NODE, "instance-1"),), node_selector=LOCAL)


def request(class_name: str = CLASS, **fields: object) -> ClaimSpec:
    return ClaimSpec((DeviceRequest("req-1", ExactRequest(class_name, **fields)),))  # type: ignore[arg-type]


PENDING_CLAIM = ResourceClaim(CLAIM, uid="claim-uid", owner=("Pod", "my-pod", "1234"), spec=request())
ALLOCATED_CLAIM = dataclasses.replace(PENDING_CLAIM, allocation=ALLOCATION)
IN_USE_CLAIM = dataclasses.replace(ALLOCATED_CLAIM, reserved_for=(Consumer("pods", "my-pod", "1234"),))
OTHER_CLAIM = ResourceClaim("not-my-claim", spec=request())
OTHER_ALLOCATED_CLAIM = dataclasses.replace(OTHER_CLAIM, allocation=ALLOCATION)
OTHER_DEVICE = Allocation((DeviceResult("req-1", DRIVER, NODE, "instance-1-other"),), node_selector=LOCAL)
BROKEN_SELECTOR = f'device.attributes["{DRIVER}"].healthy'
CEL_HINT = ". consider using CEL optional chaining (.? followed by orValue()) or guarding the check with has() for optional fields"


def prefilter(
    pod: Pod,
    claims: list[ResourceClaim],
    classes: tuple[DeviceClass, ...] = (DEVICE_CLASS,),
    slices: tuple[ResourceSlice, ...] = (),
) -> PodClaims:
    state = DraState(
        MappingProxyType({c.name: c for c in classes}),
        MappingProxyType({c.key: c for c in claims}),
        MappingProxyType({}),
        MappingProxyType({s.name: s for s in slices}),
    )
    return pod_claims(pod, state, allocated_state(claims), CelCache())


def test_missing_claim() -> None:
    """missing-claim (dynamicresources_test.go:1531): the template's claim is not made yet."""
    found = prefilter(POD_WITH_CLAIM_TEMPLATE, [ALLOCATED_CLAIM, OTHER_CLAIM])
    assert found.error == 'pod "default/my-pod": ResourceClaim not created yet'
    assert found.filter(WORKER) == (found.error,)


def test_deleted_claim() -> None:
    """deleted-claim (:1540)."""
    claim = dataclasses.replace(ALLOCATED_CLAIM, deleting=True)
    assert prefilter(POD_WITH_CLAIM_TEMPLATE_IN_STATUS, [claim]).error == f'resourceclaim "{CLAIM}" is being deleted'


def test_wrong_claim() -> None:
    """wrong-claim (:1553): the claim named in the status is owned by another pod uid."""
    claim = dataclasses.replace(ALLOCATED_CLAIM, owner=("Pod", "my-pod", "1234123"))
    assert prefilter(POD_WITH_CLAIM_TEMPLATE_IN_STATUS, [claim]).error == (
        f"ResourceClaim default/{CLAIM} was not created for Pod default/my-pod (Pod is not owner)"
    )


def test_no_resources() -> None:
    """no-resources (:1566): no slice, nothing to allocate from."""
    assert prefilter(POD_WITH_CLAIM_NAME, [PENDING_CLAIM]).filter(WORKER) == (CANNOT_ALLOCATE,)


def test_with_resources() -> None:
    """with-resources (:1581): Reserve allocates instance-1, local to worker, and reserves the
    claim for the pod."""
    found = prefilter(POD_WITH_CLAIM_NAME, [PENDING_CLAIM], slices=(WORKER_SLICE,))
    assert found.filter(WORKER) == ()
    assert found.allocations(WORKER) == {f"default/{CLAIM}": ALLOCATION}
    assert found.reserve() == (f"default/{CLAIM}",)


def test_exhausted_resources_in_informer_cache() -> None:
    """exhausted-resources-in-informer-cache (:1787): another claim holds the one device."""
    found = prefilter(POD_WITH_CLAIM_NAME, [PENDING_CLAIM, OTHER_ALLOCATED_CLAIM], slices=(WORKER_SLICE,))
    assert found.filter(WORKER) == (CANNOT_ALLOCATE,)


def _store(claims: list[ResourceClaim]) -> ClusterStore:
    state = DraState(
        MappingProxyType({CLASS: DEVICE_CLASS}),
        MappingProxyType({c.key: c for c in claims}),
        MappingProxyType({}),
        MappingProxyType({WORKER_SLICE.name: WORKER_SLICE}),
    )
    return ClusterStore.build([WORKER], [], dra=state)


def test_exhausted_resources_in_flight_claim() -> None:
    """exhausted-resources-in-flight-claim (:1803): the other claim's allocation is in flight
    (an assumed pod's Reserve, not yet written): the device is still not given twice."""
    store = _store([PENDING_CLAIM, OTHER_CLAIM])
    other = Pod("other", uid="9", resource_claims=(PodClaim("r", claim_name="not-my-claim"),))
    store.assume(other, NODE)
    assert store.dra.state.claims["default/not-my-claim"].allocation == ALLOCATION  # in flight
    snapshot = store.snapshot()
    found = pod_claims(POD_WITH_CLAIM_NAME, snapshot.dra, snapshot.dra_allocated, snapshot.dra_cel)
    assert found.filter(WORKER) == (CANNOT_ALLOCATE,)


def test_other_resources_in_flight_claim() -> None:
    """other-resources-in-flight-claim (:1828): the in-flight allocation holds another device."""
    found = prefilter(
        POD_WITH_CLAIM_NAME,
        [PENDING_CLAIM, dataclasses.replace(OTHER_CLAIM, allocation=OTHER_DEVICE)],
        slices=(WORKER_SLICE,),
    )
    assert found.allocations(WORKER) == {f"default/{CLAIM}": ALLOCATION}


def test_tainted_device_enabled() -> None:
    """tainted-device-enabled (:1903): an untolerated NoSchedule taint."""
    tainted = dataclasses.replace(
        WORKER_SLICE, devices=(Device("instance-1", taints=(DeviceTaint("taint-key", "taint-value"),)),)
    )
    assert prefilter(POD_WITH_CLAIM_NAME, [PENDING_CLAIM], slices=(tainted,)).filter(WORKER) == (CANNOT_ALLOCATE,)


def test_request_admin_access_with_the_feature() -> None:
    """request-admin-access-with-DRAAdminAccess-featuregate (:1921): admin access takes the
    device although another claim holds it."""
    claim = dataclasses.replace(PENDING_CLAIM, spec=request(admin_access=True))
    found = prefilter(POD_WITH_CLAIM_NAME, [claim, OTHER_ALLOCATED_CLAIM], slices=(WORKER_SLICE,))
    (allocation,) = found.allocations(WORKER).values()
    assert [(d.device, d.admin_access) for d in allocation.devices] == [("instance-1", True)]


def test_structured_ignore_allocated_admin_access() -> None:
    """structured-ignore-allocated-admin-access (:1970): a device another claim holds with admin
    access is free for others."""
    other = dataclasses.replace(
        OTHER_ALLOCATED_CLAIM,
        allocation=Allocation(
            (DeviceResult("req-1", DRIVER, NODE, "instance-1", admin_access=True),), node_selector=LOCAL
        ),
    )
    found = prefilter(POD_WITH_CLAIM_NAME, [PENDING_CLAIM, other], slices=(WORKER_SLICE,))
    assert found.allocations(WORKER) == {f"default/{CLAIM}": ALLOCATION}


def test_claim_parameters_cel_runtime_error() -> None:
    """claim-parameters-CEL-runtime-error (:2001)."""
    claim = dataclasses.replace(PENDING_CLAIM, spec=request(selectors=(BROKEN_SELECTOR,)))
    found = prefilter(POD_WITH_CLAIM_NAME, [claim], slices=(WORKER_SLICE,))
    assert found.filter(WORKER) == (
        f"claim default/{CLAIM}: selector #0 on device {DRIVER}/{NODE}/instance-1: CEL runtime error: no such key: healthy{CEL_HINT}",
    )


def test_class_parameters_cel_runtime_error() -> None:
    """class-parameters-CEL-runtime-error (:2015)."""
    broken = DeviceClass(CLASS, (BROKEN_SELECTOR,))
    found = prefilter(POD_WITH_CLAIM_NAME, [PENDING_CLAIM], classes=(broken,), slices=(WORKER_SLICE,))
    assert found.filter(WORKER) == (
        f"class {CLASS}: selector #0 on device {DRIVER}/{NODE}/instance-1: CEL runtime error: no such key: healthy{CEL_HINT}",
    )


def test_missing_class() -> None:
    """missing-class (:2069)."""
    assert prefilter(POD_WITH_CLAIM_NAME, [PENDING_CLAIM], classes=()).error == (
        f"request req-1: device class {CLASS} does not exist"
    )


def test_wrong_topology() -> None:
    """wrong-topology (:2081): the allocation's node selector does not select the node."""
    wrong = (NodeSelectorTerm((NodeSelectorRequirement("no-such-label", "In", ("no-such-value",)),)),)
    claim = dataclasses.replace(ALLOCATED_CLAIM, allocation=Allocation(node_selector=wrong))
    assert prefilter(POD_WITH_CLAIM_NAME, [claim]).filter(WORKER) == (NOT_AVAILABLE,)


def test_good_topology() -> None:
    """good-topology (:2105): it does; nothing to allocate, the claim to reserve."""
    good = (NodeSelectorTerm((NodeSelectorRequirement("kubernetes.io/hostname", "In", (NODE,)),)),)
    claim = dataclasses.replace(ALLOCATED_CLAIM, allocation=Allocation(node_selector=good))
    found = prefilter(POD_WITH_CLAIM_NAME, [claim])
    assert found.filter(WORKER) == () and found.allocations(WORKER) == {}
    assert found.reserve() == (f"default/{CLAIM}",)


def test_reserved_okay() -> None:
    """reserved-okay (:2344): allocated and reserved for the pod already."""
    found = prefilter(POD_WITH_CLAIM_NAME, [IN_USE_CLAIM])
    assert found.filter(WORKER) == () and found.reserve() == ()


def test_claim_with_request_with_unknown_device_class() -> None:
    """claim-with-request-with-unknown-device-class (:2368)."""
    claim = dataclasses.replace(PENDING_CLAIM, spec=request("does-not-exist"))
    assert prefilter(POD_WITH_CLAIM_NAME, [claim]).error == "request req-1: device class does-not-exist does not exist"


def _prioritized(class_name: str = CLASS) -> ClaimSpec:
    return ClaimSpec((DeviceRequest("req-1", None, (("subreq-1", ExactRequest(class_name)),)),))


def test_claim_with_prioritized_list_unknown_device_class() -> None:
    """claim-with-prioritized-list-unknown-device-class (:2394)."""
    claim = dataclasses.replace(PENDING_CLAIM, spec=_prioritized("does-not-exist"))
    assert prefilter(POD_WITH_CLAIM_NAME, [claim]).error == (
        "request req-1/subreq-1: device class does-not-exist does not exist"
    )


def test_claim_with_prioritized_list() -> None:
    """claim-with-prioritized-list (:2407): the subrequest's device, named req-1/subreq-1."""
    claim = dataclasses.replace(PENDING_CLAIM, spec=_prioritized())
    found = prefilter(POD_WITH_CLAIM_NAME, [claim], slices=(WORKER_SLICE,))
    (allocation,) = found.allocations(WORKER).values()
    assert [(d.request, d.device) for d in allocation.devices] == [("req-1/subreq-1", "instance-1")]


def test_computes_score_for_first_available() -> None:
    """Test_computesScore (dynamicresources_test.go:5297) and the multiple-claims/-requests
    prioritized-list scoring cases (:3255-3362), as the default profile's DynamicResources score:
    each request with firstAvailable scores 8 minus the index of the subrequest allocated, so a
    node giving the first alternative outscores one giving the second."""
    from rulesched.lang.builtins.dra import dra_score
    from rulesched.lang.context import EvalContext

    big = ResourceSlice("big", DRIVER, NODE, node_name=NODE, devices=(Device("a"), Device("b")))
    other = Node("other", labels=MappingProxyType({"kubernetes.io/hostname": "other"}))
    small = ResourceSlice("small", DRIVER, "other", node_name="other", devices=(Device("a"),))
    spec = ClaimSpec(
        (
            DeviceRequest(
                "req-1", None, (("subreq-1", ExactRequest(CLASS, count=2)), ("subreq-2", ExactRequest(CLASS, count=1)))
            ),
        )
    )
    claim = dataclasses.replace(PENDING_CLAIM, spec=spec)
    state = DraState(
        MappingProxyType({CLASS: DEVICE_CLASS}),
        MappingProxyType({claim.key: claim}),
        MappingProxyType({}),
        MappingProxyType({"big": big, "small": small}),
    )

    class Cluster:
        dra, dra_allocated, dra_cel, dra_pools = state, allocated_state([]), CelCache(), None

    ctx = EvalContext(POD_WITH_CLAIM_NAME, Cluster())
    assert dra_score(ctx, WORKER) == 8  # two devices: the first subrequest
    assert dra_score(ctx, other) == 7  # one device: the second
    allocated = dataclasses.replace(claim, allocation=Allocation((DeviceResult("req-1/subreq-2", DRIVER, NODE, "a"),)))
    state2 = dataclasses.replace(state, claims=MappingProxyType({claim.key: allocated}))

    class Allocated:
        dra, dra_allocated, dra_cel, dra_pools = state2, allocated_state([allocated]), CelCache(), None

    # an allocated claim counts the subrequest its allocation used
    assert dra_score(EvalContext(POD_WITH_CLAIM_NAME, Allocated()), WORKER) == 7


# --- DRA-backed extended resources: a claim an earlier attempt left --------------------------------
EXTENDED = "example.com/gpu"
EXTENDED_CLASS = DeviceClass(CLASS, extended_resource_name=EXTENDED)
POD_WITH_EXTENDED = Pod("my-pod", uid="1234", extended_dra=MappingProxyType({EXTENDED: 1}))
NODE2_SELECTOR = (NodeSelectorTerm(match_fields=(NodeSelectorRequirement("metadata.name", "In", ("worker-2",)),)),)


def _earlier_claim(name: str, node_selector: tuple[NodeSelectorTerm, ...] = LOCAL) -> ResourceClaim:
    """extendedResourceClaim / extendedResourceClaimNode2 (dynamicresources_test.go:750, :882):
    annotated, its controller the pod, one request container-0-request-0, allocated instance-1
    (extendedResourceAllocationResult, on worker; ...Node2, on worker-2)."""
    return ResourceClaim(
        name,
        uid="extended-uid",
        annotations=MappingProxyType({"resource.kubernetes.io/extended-resource-claim": "true"}),
        owner=("Pod", "my-pod", "1234"),
        spec=ClaimSpec((DeviceRequest("container-0-request-0", ExactRequest(CLASS)),)),
        allocation=Allocation(
            (DeviceResult("container-0-request-0", DRIVER, NODE, "instance-1"),), node_selector=node_selector
        ),
    )


def _earlier_claim_cases() -> list[tuple[Pod, ResourceClaim]]:
    """Upstream's claim is named my-pod-extended-resources-0 and found by scanning every claim
    for the annotation and the owner; rulesched looks it up by the name the pod's status gives
    and by the name it makes such claims under (semantics.dra_extended.earlier_claim): both
    ways are tried."""
    named = dataclasses.replace(POD_WITH_EXTENDED, extended_claim="my-pod-extended-resources-0")
    return [
        (named, _earlier_claim("my-pod-extended-resources-0")),
        (POD_WITH_EXTENDED, _earlier_claim(claim_name(POD_WITH_EXTENDED))),
    ]


def test_extended_resource_name_with_resources_has_claim() -> None:
    """extended-resource-name-with-resources-has-claim (:2609): the claim an earlier attempt
    made, allocated on worker, is still there: Filter fails with "cannot schedule extended
    resource claim" (unresolvable), PostFilter deletes the claim."""
    for pod, earlier in _earlier_claim_cases():
        found = prefilter(pod, [earlier], classes=(EXTENDED_CLASS,), slices=(WORKER_SLICE,))
        assert found.filter(WORKER) == ("cannot schedule extended resource claim",)
        assert found.unresolvable(WORKER)
        assert found.deallocatable() is None and found.to_delete() == earlier


def test_extended_resource_name_with_resources_delete_claim() -> None:
    """extended-resource-name-with-resources-delete-claim (:2631): the same, allocated on
    another node."""
    for pod, _ in _earlier_claim_cases():
        earlier = _earlier_claim(pod.extended_claim or claim_name(pod), NODE2_SELECTOR)
        found = prefilter(pod, [earlier], classes=(EXTENDED_CLASS,), slices=(WORKER_SLICE,))
        assert found.filter(WORKER) == ("cannot schedule extended resource claim",)
        assert found.to_delete() == earlier


def test_a_claim_not_the_pods_is_not_its_earlier_claim() -> None:
    """findExtendedResourceClaim: only a claim annotated as such whose controller is the pod (by
    name and uid). One without the annotation under the pod's claim name, or the earlier claim
    of a pod of the same name with another uid (named for that pod), is not the pod's: the pod
    fits, a claim made for it."""
    earlier_pod = dataclasses.replace(POD_WITH_EXTENDED, uid="5678")
    for other in (
        dataclasses.replace(_earlier_claim(claim_name(POD_WITH_EXTENDED)), annotations=MappingProxyType({})),
        dataclasses.replace(_earlier_claim(claim_name(earlier_pod)), owner=("Pod", "my-pod", "5678")),
    ):
        found = prefilter(
            POD_WITH_EXTENDED,
            [dataclasses.replace(other, allocation=None)],
            classes=(EXTENDED_CLASS,),
            slices=(WORKER_SLICE,),
        )
        assert found.filter(WORKER) == () and found.to_delete() is None
        assert found.made_claim(WORKER) is not None
