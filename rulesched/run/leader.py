"""Leader election on a coordination.k8s.io Lease, as kube-scheduler's (client-go's) works.

A candidate reads the Lease every ``retry_period``. It takes the lease when nobody holds it or
when the holder has not renewed it for ``lease_duration`` *as this candidate observed it* (the
time it last saw the record change, not the record's own timestamps, so clocks need not agree),
by replacing the object with its own identity under the resourceVersion it read: of two
candidates only one replace succeeds (409 for the other). The leader renews every
``retry_period``; if it has not renewed for ``renew_deadline`` (shorter than the lease duration)
it stops leading before anyone else can take the lease, so two leaders never schedule at once.
Next stage: :mod:`rulesched.run.loop` schedules only while :attr:`LeaderElector.leading`.
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

from rulesched.errors import ConflictError, KubeError, NotFoundError
from rulesched.kube.api import LEASES, KubeApi

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LeaderSettings:
    namespace: str = "kube-system"
    name: str = "rulesched"
    lease_duration: float = 15.0  # kube-scheduler's defaults
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    identity: str = ""


def _micro(now: float | None = None) -> str:
    return datetime.fromtimestamp(now if now is not None else time.time(), UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(
        self, api: KubeApi, settings: LeaderSettings, stop: threading.Event, on_lost: Callable[[], None] = lambda: None
    ) -> None:
        self.api, self.settings, self.stop, self.on_lost = api, settings, stop, on_lost
        self.identity = settings.identity or f"{socket.gethostname()}_{os.getpid()}_{uuid.uuid4().hex[:6]}"
        self.leading = threading.Event()
        self._observed: tuple[str, float] | None = None  # (record as seen, when it last changed)
        self._thread = threading.Thread(target=self._run, name="leader-election", daemon=True)
        self._lease = f"{settings.namespace}/{settings.name}"  # (for the log)

    def start(self) -> LeaderElector:
        log.info("waiting for the lease", extra={"lease": self._lease, "identity": self.identity})
        self._thread.start()
        return self

    def _run(self) -> None:
        settings = self.settings
        last_renew = 0.0
        while not self.stop.is_set():
            ok = self._try()
            now = time.monotonic()
            if ok:
                last_renew = now
                if not self.leading.is_set():
                    log.info("became the leader", extra={"lease": self._lease, "identity": self.identity})
                    self.leading.set()
            elif self.leading.is_set() and now - last_renew >= settings.renew_deadline:
                log.error(
                    "could not renew the lease within %gs: no longer leading",
                    settings.renew_deadline,
                    extra={"lease": self._lease, "identity": self.identity},
                )
                self.leading.clear()
                self.on_lost()
            self.stop.wait(settings.retry_period)
        if self.leading.is_set():
            self._release()

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

    def _release(self) -> None:
        """Give the lease up on a clean exit, so a standby takes over at once."""
        try:
            current = self.api.get(LEASES, self.settings.namespace, self.settings.name)
            if (current.get("spec") or {}).get("holderIdentity") == self.identity:
                spec = {**current["spec"], "holderIdentity": "", "leaseDurationSeconds": 1, "renewTime": _micro()}
                self.api.replace(LEASES, self.settings.namespace, self.settings.name, {**current, "spec": spec})
                log.info("lease released", extra={"lease": self._lease, "identity": self.identity})
        except KubeError:
            pass
        self.leading.clear()
