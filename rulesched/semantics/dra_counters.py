"""Shared counters (DRAPartitionableDevices): a pool's counter sets less what its allocated
devices consume, and what the devices one allocation is taking consume on top of that
(upstream's availableCounters and the allocator's consumedCounters)."""

from __future__ import annotations

from rulesched.semantics.dra_devices import AllocatedState, Candidate
from rulesched.semantics.dra_pools import Pool


class PoolCounters:
    """The counters each pool has left in one cluster state (computed once per pool)."""

    def __init__(self, allocated: AllocatedState) -> None:
        self.allocated = allocated
        self._available: dict[str, dict[str, dict[str, int]]] = {}  # pool id -> counter set -> counters left

    def available(self, pool: Pool) -> dict[str, dict[str, int]]:
        found = self._available.get(pool.id)
        if found is None:
            found = {name: dict(cs.counters) for name, cs in pool.counter_sets.items()}
            for s in (*pool.slices, *pool.other_slices):
                for d in s.devices:
                    if not self.allocated.in_use((s.driver, s.pool, d.name)):
                        continue
                    for consumption in d.consumes_counters:
                        left = found.get(consumption.counter_set)
                        if left is None:
                            continue
                        for counter, amount in consumption.counters.items():
                            if counter in left:
                                left[counter] -= amount
            self._available[pool.id] = found
        return found


class CounterUse:
    """What the devices one allocation takes consume, checked against what is left."""

    def __init__(self, pools: PoolCounters) -> None:
        self.pools = pools
        self.consumed: dict[str, dict[str, dict[str, int]]] = {}  # pool id -> counter set -> consumed

    def take(self, cand: Candidate) -> bool:
        """Add the device's consumption; False (and nothing added) when a counter would go short."""
        available = self.pools.available(cand.pool)
        consumed = self.consumed.setdefault(cand.pool.id, {})
        for consumption in cand.device.consumes_counters:
            used = consumed.setdefault(consumption.counter_set, {})
            for counter, amount in consumption.counters.items():
                used[counter] = used.get(counter, 0) + amount
        for set_name, counters in available.items():
            used = consumed.get(set_name, {})
            for counter, left in counters.items():
                if left < used.get(counter, 0):
                    self.release(cand)
                    return False
        return True

    def release(self, cand: Candidate) -> None:
        consumed = self.consumed.get(cand.pool.id, {})
        for consumption in cand.device.consumes_counters:
            used = consumed.get(consumption.counter_set, {})
            for counter, amount in consumption.counters.items():
                used[counter] = used.get(counter, 0) - amount
