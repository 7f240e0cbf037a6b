"""DeviceTaintRules (kube-scheduler 1.37's DRADeviceTaintRules, GA and on): a rule's taint is
added to the taints of every device its selector picks, as if the driver had published it, so
the allocator gives such a device only to a request that tolerates the taint (its ``NoSchedule``
and ``NoExecute`` effects; ``None`` is informational) and rules see it in ``node.devices``.

Upstream: k8s.io/dynamic-resource-allocation/resourceslice/tracker (tracker.go's applyPatches,
at v0.37.2), which sits between the ResourceSlice informer and kube-scheduler's DRA manager and
hands the allocator slices with the rules applied. Here, likewise, the slices are patched before
they reach the store (:class:`TaintedSlices`, which the informer cache and the file loader feed):
a rule without a device selector applies to no device; a selector's driver, pool and device,
each when set, must equal the slice's driver, its pool's name and the device's name; the taint
is appended to the device's own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from rulesched.model.dra import DeviceTaintRule, ResourceSlice


def applies(rule: DeviceTaintRule, driver: str, pool: str) -> bool:
    """Whether ``rule`` may pick devices of a slice of ``driver`` and ``pool``."""
    return rule.selects and (rule.driver is None or rule.driver == driver) and (rule.pool is None or rule.pool == pool)


def tainted(slice_: ResourceSlice, rules: Iterable[DeviceTaintRule]) -> ResourceSlice:
    """``slice_`` with the taints of the rules picking its devices added (applyPatches); the
    slice itself when none does."""
    picking = [r for r in rules if applies(r, slice_.driver, slice_.pool)]
    if not picking:
        return slice_
    devices = list(slice_.devices)
    changed = False
    for i, device in enumerate(devices):
        added = tuple(r.taint for r in picking if r.device is None or r.device == device.name)
        if added:
            devices[i] = dataclasses.replace(device, taints=(*device.taints, *added))
            changed = True
    return dataclasses.replace(slice_, devices=tuple(devices)) if changed else slice_


class TaintedSlices:
    """The slices as published and the DeviceTaintRules, and the slices with the rules applied
    (what the store keeps): :meth:`slice` and :meth:`rule` take a change and return the patched
    slices to write (name -> slice, None: removed)."""

    def __init__(self) -> None:
        self.published: dict[str, ResourceSlice] = {}
        self.rules: dict[str, DeviceTaintRule] = {}

    def slice(self, name: str, value: ResourceSlice | None) -> dict[str, ResourceSlice | None]:
        if value is None:
            self.published.pop(name, None)
            return {name: None}
        self.published[name] = value
        return {name: tainted(value, self.rules.values()) if self.rules else value}

    def rule(self, name: str, value: DeviceTaintRule | None) -> dict[str, ResourceSlice | None]:
        """A rule added, changed or deleted: the slices it picked or picks now, patched afresh."""
        before = self.rules.pop(name, None)
        if value is not None:
            self.rules[name] = value
        touched = [r for r in (before, value) if r is not None]
        rules = list(self.rules.values())
        return {
            key: tainted(s, rules)
            for key, s in self.published.items()
            if any(applies(r, s.driver, s.pool) for r in touched)
        }

    def load(
        self, slices: Mapping[str, ResourceSlice], rules: Mapping[str, DeviceTaintRule]
    ) -> dict[str, ResourceSlice]:
        """Everything at once (a cluster file): the patched slices."""
        self.published, self.rules = dict(slices), dict(rules)
        listed = list(self.rules.values())
        return {key: tainted(s, listed) for key, s in self.published.items()}
