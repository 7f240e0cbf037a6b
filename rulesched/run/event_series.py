"""FailedScheduling events counted as client-go's events.k8s.io/v1 broadcaster counts
kube-scheduler's (k8s.io/client-go v0.37.2 tools/events/event_broadcaster.go, recordToSink,
getKey, finishSeries, refreshExistingEventSeries).

An event isomorphic to one sent in the last six minutes is not posted again: the second one
makes the first a series (a strategic merge patch of its ``series``: count 2 and when it was
last seen), later ones only count; the count is written when the series ends (six minutes
without another) and every thirty minutes while it lasts. Isomorphic: the same type, action,
reason, reporter and ``regarding`` object reference, whatever the note; the reference carries
the pod's resourceVersion as the scheduler saw it in the cycle, so a pod whose status was written
since its last event (its PodScheduled condition changed, its nomination set) and seen so gets a
new event, and only failures with nothing new seen in between repeat one. Checked against the
real kube-scheduler (tests/test_real_run.py): a pod failing twice with two messages gets two
events from both.

Pure bookkeeping: :class:`EventSeries` says what to send (a :class:`Write`, the series as it was
then); :mod:`rulesched.run.workers` sends it. Ended series are looked for when events come (at
most once a minute), not on a timer of their own as client-go's: a count is written late, or
not at all, if no pod fails for long.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from typing import Any

FINISH_SECONDS = 6 * 60.0  # client-go's finishTime: a series ends this long after its last event
REFRESH_SECONDS = 30 * 60.0  # client-go's refreshTime: a lasting series' count written this often
SWEEP_SECONDS = 60.0  # how often ended series are looked for (client-go: every finishTime)


class Send(Enum):
    """What an observed event asks of the API server."""

    EVENT = "event"  # the first of its kind: posted
    SERIES = "series"  # the second: the first event patched into a series (count 2)
    NOTHING = "nothing"  # the third and later: counted here


@dataclass(frozen=True)
class Key:
    """client-go's eventKey (the note is not part of it); ``pod`` is namespace/name."""

    type: str
    action: str
    reason: str
    reporter: str
    pod: str
    uid: str
    resource_version: str  # the pod's, as the cycle saw it


@dataclass(frozen=True)
class Write:
    """What to send for a series at one moment: the event posted as ``namespace``/``name``, and
    its count and when it was last seen as they were then."""

    namespace: str
    name: str
    count: int
    last_observed: str

    def fields(self) -> dict[str, Any]:
        """The event's ``series``: client-go's patch of a repeated event is ``{"series": this}``
        (createPatchBytesForSeries: the event with its series against the event without)."""
        return {"count": self.count, "lastObservedTime": self.last_observed}


@dataclass
class _Series:
    namespace: str
    name: str  # the first event's
    count: int = 1  # 1: posted once, not a series yet
    last_seen: float = 0.0  # (the caller's monotonic clock)
    last_observed: str = ""  # the same moment as the API's MicroTime
    written: float = 0.0  # when the count was last sent

    def write(self) -> Write:
        return Write(self.namespace, self.name, self.count, self.last_observed)


def micro_time() -> str:
    """Now as an events.k8s.io MicroTime."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class EventSeries:
    """The isomorphic events seen in the last six minutes (client-go's eventCache). Not
    thread-safe: the caller holds its lock."""

    def __init__(self) -> None:
        self._series: dict[Key, _Series] = {}
        self._swept = 0.0

    def __len__(self) -> int:
        return len(self._series)

    def observe(self, key: Key, namespace: str, name: str, now: float) -> tuple[Send, Write]:
        """An event of ``key`` happened at ``now``; ``namespace``/``name``: what it is posted as
        if it is the first. Returns what to send, and for which event. (Call :meth:`due` first:
        a series that ended before ``now`` is not continued.)"""
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = _Series(namespace, name, last_seen=now, written=now)
            return Send.EVENT, series.write()
        series.count += 1
        series.last_seen, series.last_observed = now, micro_time()
        if series.count == 2:
            series.written = now
            return Send.SERIES, series.write()
        return Send.NOTHING, series.write()

    def due(self, now: float) -> list[Write]:
        """The series whose count is to be written now: those ended (six minutes since their
        last event; forgotten after) and those lasting thirty minutes since their count was last
        written. Ended singletons are forgotten. Looked at once a minute at most."""
        if now - self._swept < SWEEP_SECONDS:
            return []
        self._swept = now
        out: list[Write] = []
        for key, series in list(self._series.items()):
            if now - series.last_seen >= FINISH_SECONDS:
                del self._series[key]
                if series.count > 1:
                    out.append(series.write())
            elif series.count > 1 and now - series.written >= REFRESH_SECONDS:
                series.written = now
                out.append(series.write())
        return out
