"""Where each kind lives in the API: :class:`Resource` (a kind's URL, every variable part checked
as the API server checks it), :class:`Scope` (what a list or watch covers) and the kinds rulesched
reads and writes. Plain values, no client: :mod:`rulesched.kube.api` sends the requests.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from rulesched.errors import KubeError
from rulesched.model.names import dns1123_label


@dataclass(frozen=True)
class Resource:
    """Where a kind lives in the API."""

    kind: str
    prefix: str  # /api/v1, /apis/policy/v1, ...
    plural: str
    namespaced: bool
    optional: bool = False  # a server that does not serve it has none (its list's 404: empty)

    @property
    def api_version(self) -> str:
        """The objects' apiVersion: "v1" for /api/v1, "group/version" for /apis/group/version."""
        return self.prefix.removeprefix("/api/").removeprefix("/apis/")

    def path(self, namespace: str | None = None, name: str | None = None, sub: str | None = None) -> str:
        """The URL path, every variable part checked as the API server would check it and
        percent-escaped: a name such as ``p?watch=1`` must never turn a read into a watch."""
        parts = [self.prefix]
        if namespace is not None and self.namespaced:
            parts += ["namespaces", quote(checked_namespace(namespace), safe="")]
        parts.append(self.plural)
        if name is not None:
            parts.append(quote(checked_name(name, self.kind), safe=""))
        if sub is not None:
            parts.append(quote(sub, safe=""))
        return "/".join(parts)


MAX_NAME = 253  # a DNS subdomain: the longest name of every kind rulesched addresses by name


def checked_namespace(namespace: str) -> str:
    """A namespace name as the API server accepts it (a DNS label), else KubeError (400)."""
    problem = dns1123_label(namespace)
    if problem:
        raise KubeError(f"namespace {problem}", 400)
    return namespace


def checked_name(name: str, kind: str = "object") -> str:
    """A name that can stand in a URL path (apimachinery's ValidatePathSegmentName: not empty,
    not ``.`` or ``..``, no ``/`` or ``%``; at most 253 characters), else KubeError (400)."""
    if not name or name in (".", "..") or "/" in name or "%" in name or len(name) > MAX_NAME:
        raise KubeError(f"{kind} name {name[:70]!r} cannot be addressed (empty, '.', '..', '/', '%' or too long)", 400)
    return name


@dataclass(frozen=True)
class Scope:
    """Which objects of a kind a list or watch covers: one namespace, one name (a field
    selector on ``metadata.name``, as for a single ConfigMap)."""

    namespace: str | None = None
    name: str | None = None

    def query(self) -> dict[str, str]:
        return {"fieldSelector": f"metadata.name={self.name}"} if self.name else {}


NODES = Resource("Node", "/api/v1", "nodes", False)
PODS = Resource("Pod", "/api/v1", "pods", True)
NAMESPACES = Resource("Namespace", "/api/v1", "namespaces", False)
CONFIGMAPS = Resource("ConfigMap", "/api/v1", "configmaps", True)
PDBS = Resource("PodDisruptionBudget", "/apis/policy/v1", "poddisruptionbudgets", True)
PRIORITY_CLASSES = Resource("PriorityClass", "/apis/scheduling.k8s.io/v1", "priorityclasses", False)
LEASES = Resource("Lease", "/apis/coordination.k8s.io/v1", "leases", True)
EVENTS = Resource("Event", "/apis/events.k8s.io/v1", "events", True)
# read for their selectors (system default topology spreading)
SERVICES = Resource("Service", "/api/v1", "services", True)
REPLICATION_CONTROLLERS = Resource("ReplicationController", "/api/v1", "replicationcontrollers", True)
REPLICA_SETS = Resource("ReplicaSet", "/apis/apps/v1", "replicasets", True)
STATEFUL_SETS = Resource("StatefulSet", "/apis/apps/v1", "statefulsets", True)
PVS = Resource("PersistentVolume", "/api/v1", "persistentvolumes", False)
PVCS = Resource("PersistentVolumeClaim", "/api/v1", "persistentvolumeclaims", True)
STORAGE_CLASSES = Resource("StorageClass", "/apis/storage.k8s.io/v1", "storageclasses", False)
CSINODES = Resource("CSINode", "/apis/storage.k8s.io/v1", "csinodes", False)
# Dynamic Resource Allocation (resource.k8s.io/v1, GA since 1.34)
DEVICE_CLASSES = Resource("DeviceClass", "/apis/resource.k8s.io/v1", "deviceclasses", False)
RESOURCE_CLAIMS = Resource("ResourceClaim", "/apis/resource.k8s.io/v1", "resourceclaims", True)
RESOURCE_CLAIM_TEMPLATES = Resource("ResourceClaimTemplate", "/apis/resource.k8s.io/v1", "resourceclaimtemplates", True)
RESOURCE_SLICES = Resource("ResourceSlice", "/apis/resource.k8s.io/v1", "resourceslices", False)
# GA in 1.37 (DRADeviceTaintRules); not served at v1 before: an informer of it takes a 404 as
# none there (Resource.optional)
DEVICE_TAINT_RULES = Resource("DeviceTaintRule", "/apis/resource.k8s.io/v1", "devicetaintrules", False, optional=True)
# metrics-server's NodeMetrics, served through the API server's aggregation layer (list only)
NODE_METRICS = Resource("NodeMetrics", "/apis/metrics.k8s.io/v1beta1", "nodes", False)
# The Policy Report API (kubernetes-sigs/wg-policy-prototypes), which Kyverno and Policy Reporter
# read: `rulesched audit --live --publish` and `run --audit-interval` write one per namespace.
POLICY_REPORTS = Resource("PolicyReport", "/apis/wgpolicyk8s.io/v1alpha2", "policyreports", True)
# Pod groups (gangs): scheduler-plugins' PodGroup CRD, and the workload API's runtime groups
# (scheduling.k8s.io: PodGroups at v1beta1 in 1.37, v1alpha2 in 1.36; CompositePodGroups at
# v1alpha3 in 1.37), at the version the server serves (:meth:`KubeApi.served_versions`).
PODGROUPS = Resource("PodGroup", "/apis/scheduling.x-k8s.io/v1alpha1", "podgroups", True)
WORKLOAD_API_GROUP = "scheduling.k8s.io"


def workload_pod_groups(version: str) -> Resource:
    """The workload API's PodGroups at ``version`` (v1beta1, v1alpha3, v1alpha2)."""
    return Resource("PodGroup", f"/apis/{WORKLOAD_API_GROUP}/{version}", "podgroups", True)


def composite_pod_groups(version: str = "v1alpha3") -> Resource:
    return Resource("CompositePodGroup", f"/apis/{WORKLOAD_API_GROUP}/{version}", "compositepodgroups", True)


def workloads(version: str) -> Resource:
    return Resource("Workload", f"/apis/{WORKLOAD_API_GROUP}/{version}", "workloads", True)
