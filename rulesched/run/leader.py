"""Leader election on a coordination.k8s.io Lease, as kube-scheduler's (client-go's) works.

A candidate reads the Lease every ``retry_period``. It takes the lease when nobody holds it or
when the holder has not renewed it for ``lease_duration`` *as this candidate observed it* (the
time it last saw the record change, not the record's own timestamps, so clocks need not agree),
by replacing the object with its own identity under the resourceVersion it read: of two
candidates only one replace succeeds (409 for the other). The leader renews every
``retry_period``.

Fencing: the leader holds the lease, as far as it may act on it, only until ``renew_deadline``
(shorter than the lease duration) after it *sent* its last successful renewal, on the monotonic
clock (:meth:`LeaderElector.holds`). Another candidate can take the lease no sooner than
``lease_duration`` after it saw that renewal, which was after it was sent, so the leader's own
deadline always passes first, whatever happened in between: a partition, a slow API server, or
the process paused (SIGSTOP, a frozen VM: the monotonic clock runs on meanwhile, so the first
check after waking fails). Every write the scheduler makes checks :meth:`holds` right before the
call (:mod:`rulesched.run.workers`). Past the deadline it stops leading and reports the loss.
On a clean exit :meth:`LeaderElector.release` gives the lease up, once the writes under way have
ended, so a standby takes over at its next retry instead of after the lease duration.
Next stage: :mod:`rulesched.run.loop` schedules only while :meth:`LeaderElector.holds`.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from rulesched.errors import ConfigError, ConflictError, KubeError, NotFoundError
from rulesched.kube.api import KubeApi
from rulesched.kube.resources import LEASES

log = logging.getLogger(__name__)


JITTER = 1.2  # client-go's JitterFactor: the renew deadline must leave room for a late retry


def check_timing(lease_duration: float, renew_deadline: float, retry_period: float) -> None:
    """client-go's rules, which fencing relies on: retry period x 1.2 < renew deadline < lease
    duration (ConfigError, naming the flags, otherwise)."""
    if min(lease_duration, renew_deadline, retry_period) <= 0:
        raise ConfigError("--leader-elect-lease-duration, -renew-deadline and -retry-period must be positive")
    if renew_deadline >= lease_duration:
        raise ConfigError(
            f"--leader-elect-renew-deadline ({renew_deadline:g}s) must be shorter than "
            f"--leader-elect-lease-duration ({lease_duration:g}s): a leader must stop before another can take over"
        )
    if renew_deadline <= JITTER * retry_period:
        raise ConfigError(
            f"--leader-elect-renew-deadline ({renew_deadline:g}s) must be longer than "
            f"{JITTER:g} x --leader-elect-retry-period ({retry_period:g}s)"
        )


@dataclass(frozen=True)
class LeaderSettings:
    namespace: str = "kube-system"
    name: str = "rulesched"
    lease_duration: float = 15.0  # kube-scheduler's defaults
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    identity: str = ""

    def __post_init__(self) -> None:
        check_timing(self.lease_duration, self.renew_deadline, self.retry_period)


def _micro(now: float | None = None) -> str:
    return datetime.fromtimestamp(now if now is not None else time.time(), UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(
        self, api: KubeApi, settings: LeaderSettings, stop: threading.Event, on_lost: Callable[[], None] = lambda: None
    ) -> None:
        self.api, self.settings, self.stop, self.on_lost = api, settings, stop, on_lost
        self.identity = settings.identity or f"{socket.gethostname()}_{os.getpid()}_{uuid.uuid4().hex[:6]}"
        self.leading = threading.Event()
        self.valid_until = 0.0  # monotonic: last successful renewal sent + renew_deadline
        self._observed: tuple[str, float] | None = None  # (record as seen, when it last changed)
        self._thread = threading.Thread(target=self._run, name="leader-election", daemon=True)
        self._lease = f"{settings.namespace}/{settings.name}"  # (for the log)

    def start(self) -> LeaderElector:
        log.info("waiting for the lease", extra={"lease": self._lease, "identity": self.identity})
        self._thread.start()
        return self

    def holds(self) -> bool:
        """Whether this candidate may act as the leader now (any thread; a flag test and a
        clock read)."""
        return self.leading.is_set() and time.monotonic() < self.valid_until

    def _run(self) -> None:
        settings = self.settings
        while not self.stop.is_set():
            sent = time.monotonic()  # (before the request: the record the others see is newer)
            ok = self._try()
            if ok:
                self.valid_until = sent + settings.renew_deadline
                if not self.leading.is_set():
                    log.info("became the leader", extra={"lease": self._lease, "identity": self.identity})
                    self.leading.set()
            elif self.leading.is_set() and time.monotonic() >= self.valid_until:
                log.error(
                    "could not renew the lease within %gs: no longer leading",
                    settings.renew_deadline,
                    extra={"lease": self._lease, "identity": self.identity},
                )
                self.leading.clear()
                self.on_lost()
            self.stop.wait(settings.retry_period)

    def _try(self) -> bool:
        """Acquire or renew; True when this candidate holds the lease now."""
        settings = self.settings
        spec = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(max(1, round(settings.lease_duration))),
            "renewTime": _micro(),
        }
        try:
            current = self.api.get(LEASES, settings.namespace, settings.name)
        except NotFoundError:
            try:
                body = {
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": {"name": settings.name, "namespace": settings.namespace},
                    "spec": {**spec, "acquireTime": _micro(), "leaseTransitions": 0},
                }
                self.api.create(LEASES, settings.namespace, body)
                return True
            except KubeError:
                return False
        except KubeError as err:
            log.warning("lease not read or renewed: %s", err, extra={"lease": self._lease})
            return False
        held: dict[str, Any] = current.get("spec") or {}
        holder = held.get("holderIdentity") or ""
        record = repr(sorted(held.items()))
        now = time.monotonic()
        if self._observed is None or self._observed[0] != record:
            self._observed = (record, now)
        expired = now - self._observed[1] >= float(held.get("leaseDurationSeconds") or settings.lease_duration)
        if holder and holder != self.identity and not expired:
            return False
        if holder != self.identity:
            spec["acquireTime"] = _micro()
            spec["leaseTransitions"] = int(held.get("leaseTransitions") or 0) + 1
        else:
            spec["acquireTime"] = held.get("acquireTime") or _micro()
            spec["leaseTransitions"] = int(held.get("leaseTransitions") or 0)
        body = {**current, "spec": spec}
        try:
            self.api.replace(LEASES, settings.namespace, settings.name, body)
            return True
        except ConflictError:
            return False  # someone else wrote it first
        except KubeError as err:
            log.warning("lease not read or renewed: %s", err, extra={"lease": self._lease})
            return False

    def release(self, timeout: float = 2.0) -> None:
        """After ``stop``: give the lease up (clean exit), so a standby takes over at its next
        retry. Call it once the writes under way have ended; from then on :meth:`holds` is
        false. Waits up to ``timeout`` for the renewal loop to end first (a renewal racing the
        release could take the lease back); if it does not, the lease is left to expire."""
        if self._thread.ident is not None:  # (started)
            self._thread.join(timeout)
        held = self.holds()
        self.leading.clear()
        if not held or self._thread.is_alive():
            return
        settings = self.settings
        try:
            current = self.api.get(LEASES, settings.namespace, settings.name, timeout=timeout)
            if (current.get("spec") or {}).get("holderIdentity") == self.identity:
                spec = {**current["spec"], "holderIdentity": "", "leaseDurationSeconds": 1, "renewTime": _micro()}
                self.api.replace(LEASES, settings.namespace, settings.name, {**current, "spec": spec}, timeout=timeout)
                log.info("lease released", extra={"lease": self._lease, "identity": self.identity})
        except KubeError as err:
            log.info("lease not released: %s", err, extra={"lease": self._lease, "identity": self.identity})
