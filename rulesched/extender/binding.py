"""The extender's bind verb: who may be bound where, and the binding with its volume choices.

kube-scheduler calls ``bindVerb`` (when configured) in place of its own binding, for a pod it
has just placed. The verb writes to the cluster, so unlike the read-only verbs it checks what it
is asked against the informer cache before any API call:

* it is off unless configured (``bind_verb``; the shipped scheduler-config leaves ``bindVerb``
  commented out): kube-scheduler then binds itself and the extender needs no write access;
* the pod must be pending in the informer cache, with the UID given (when one is), and name a
  scheduler this extender binds for (``scheduler_names``: kube-scheduler's profiles that call
  it, ``default-scheduler`` unless configured);
* the node must exist in the informer cache.

A refusal is answered 403 with the reason in ``Error`` (kube-scheduler reads any status but 200,
or a non-empty ``Error``, as a failed binding and queues the pod again). Then, as
``rulesched run`` binds: the pod's volume choices (VolumeBinding's PreBind,
:mod:`rulesched.kube.volumes`), the Binding, and the choices taken back if the binding fails.
Every API call is bounded by what is left of ``budget`` seconds, so that a slow API server
cannot hold the extender's one worker past kube-scheduler's ``httpTimeout``.
Next stage: :mod:`rulesched.extender.wire` encodes the result.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Container, Mapping
from dataclasses import dataclass

from rulesched.cluster.snapshot import Snapshot
from rulesched.errors import KubeError
from rulesched.extender.wire import BindingArgs, binding_result
from rulesched.kube.api import KubeApi
from rulesched.kube.volumes import VolumeWrite, apply_writes, revert_writes, writes_for
from rulesched.lang.builtins.volume_binding import plan_bindings
from rulesched.model import Pod

log = logging.getLogger(__name__)

MIN_CALL_TIMEOUT = 0.2  # an API call gets at least this long, even late in the budget
UNDO_TIMEOUT = 1.0  # taking a volume choice back is tried even after the budget ran out


@dataclass(frozen=True)
class BindSettings:
    enabled: bool = False
    scheduler_names: frozenset[str] = frozenset({"default-scheduler"})
    budget: float = 4.0  # seconds for one binding's API calls (kube-scheduler's httpTimeout: 5 s)


@dataclass(frozen=True)
class Refusal:
    status: int
    reason: str


def refusal(
    args: BindingArgs,
    settings: BindSettings,
    pending: Mapping[str, Pod],
    bound_to: Callable[[str], str | None],
    nodes: Container[str],
) -> Refusal | None:
    """Why the binding must not be made, or None. ``pending``: the informer cache's pending
    pods by key; ``bound_to``: a bound pod's node by key; ``nodes``: the names of its nodes."""
    if not settings.enabled:
        return Refusal(403, "the bind verb is off (rulesched extender --bind-verb turns it on)")
    key = f"{args.pod_namespace}/{args.pod_name}"
    pod = pending.get(key)
    if pod is None:
        where = bound_to(key)
        if where is not None:
            return Refusal(403, f"pod {key} is already bound to node {where}")
        return Refusal(403, f"pod {key} is not a pending pod in rulesched's informer cache")
    if args.pod_uid and args.pod_uid != pod.uid:
        return Refusal(403, f"pod {key} has UID {pod.uid}, not {args.pod_uid[:40]}")
    if pod.scheduler_name not in settings.scheduler_names:
        names = ", ".join(sorted(settings.scheduler_names))
        return Refusal(403, f"pod {key} names scheduler {pod.scheduler_name!r}; this extender binds for {names}")
    if args.node not in nodes:
        return Refusal(403, f"node {args.node} is not in rulesched's informer cache")
    return None


def bind(
    api: KubeApi,
    pod: Pod,
    node: str,
    snapshot: Snapshot,
    budget: float,
    clock: Callable[[], float] = time.monotonic,
) -> bytes:
    """The volume choices, then the Binding; the ExtenderBindingResult to answer."""
    deadline = clock() + budget

    def remaining() -> float:
        return max(MIN_CALL_TIMEOUT, deadline - clock())

    extra = {"pod": pod.key, "node": node}
    writes = _volume_writes(pod, node, snapshot)
    try:
        apply_writes(api, writes, timeout=remaining())
    except KubeError as err:
        log.warning("bind failed: binding volumes: %s", err, extra=extra)
        return binding_result(f"binding volumes: {err}")
    try:
        api.bind(pod.namespace, pod.name, pod.uid, node, timeout=remaining())
    except KubeError as err:
        revert_writes(api, writes, timeout=UNDO_TIMEOUT)
        log.warning("bind failed: %s", err, extra=extra)
        return binding_result(str(err))
    log.info("bound", extra=extra)
    return binding_result()


def _volume_writes(pod: Pod, node: str, snapshot: Snapshot) -> list[VolumeWrite]:
    """VolumeBinding's choices for the pod on the node, from the informer cache's claims and
    volumes, as API writes."""
    if not pod.claims:
        return []
    view = snapshot.node_view(node)
    if view is None:  # (checked before: the node is in the cache)
        return []
    return writes_for(plan_bindings(pod, snapshot.storage, view), snapshot.storage, node)
