"""Warning events for rule sets that were refused, aggregated so a storm of bad updates posts a
few events rather than one per update.

The first refusal is posted at once. Refusals within ``interval`` seconds after a posted event
are only counted; when the interval has passed, one event carries their count, when the first
of them happened and the latest one's diagnostics ("3 more updates rejected since 12:00:01Z;
latest: ..."). So a source gets at most one event per interval, and none is lost from the count.
This is what client-go's event correlator does for repeated events on one object (it combines
similar events and rate-limits each source and object), reduced to the one reason posted here.
Next stage: :meth:`rulesched.kube.api.KubeApi.post_event` (through the reloader's callback).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime


def _utc(when: float) -> str:
    return datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class RejectionEvents:
    def __init__(
        self,
        post: Callable[[str], None],
        interval: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.post, self.interval, self.clock, self.wall = post, interval, clock, wall
        self.posted = 0  # events posted (tests, metrics)
        self._last: float | None = None  # clock() of the last posted event
        self._held = 0  # refusals since then, not posted yet
        self._held_since = 0.0  # wall time of the first of them
        self._latest = ""
        self._lock = threading.Lock()

    def rejected(self, note: str) -> None:
        """A refusal: posted now, or counted into the next aggregated event."""
        with self._lock:
            now = self.clock()
            if self._last is not None and now - self._last < self.interval:
                if not self._held:
                    self._held_since = self.wall()
                self._held += 1
                self._latest = note
                return
            note = self._take(note)
            self._last = now
        self._post(note)

    def flush(self) -> None:
        """Post the held refusals once the interval has passed (called now and then)."""
        with self._lock:
            if not self._held or self._last is None or self.clock() - self._last < self.interval:
                return
            note = self._take(None)
            self._last = self.clock()
        self._post(note)

    def _take(self, note: str | None) -> str:
        """The note to post: the held refusals summed up, with the latest one's diagnostics."""
        held, since, latest = self._held, self._held_since, self._latest
        self._held, self._latest = 0, ""
        if note is not None:
            if not held:
                return note
            held, latest = held + 1, note  # this refusal counts with the held ones
        return f"{held} update{'s' if held != 1 else ''} rejected since {_utc(since)}; latest: {latest}"

    def _post(self, note: str) -> None:
        self.posted += 1
        self.post(note)
