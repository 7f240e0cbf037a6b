"""(The binding process.) Preemption victims' removals, handed over by the scheduling process.

On the scheduling process's own threads (:mod:`rulesched.run.evictions`) a victim's status patch
and DELETE waited for the interpreter lock behind the scheduling thread: on the saturated 2-core
test bed they were sent 0.35-0.64 s after the preemption (median), kube-scheduler's 0.07-0.11 s,
and while a victim lingered, later higher preemptors saw its node and preempted again. Here they
go from the binding process (:mod:`rulesched.run.binder`), whose lock the bindings' pipeline
thread hardly holds.

Each removal is what the scheduling process decided when the scheduler handed the victim over
(:class:`rulesched.run.evictions.Removal`: how it goes, its status patch, its event); its calls
are the in-process ones (:func:`rulesched.run.evictions.remove_once`), on a pool of threads of
their own, written only while the lease the parent last sent holds, retried alike (every
EVICTION_RETRY_SECONDS, a budget's refusal never), and its end is told back (``ended``), which
the parent applies as it applies its own threads' (:meth:`EvictionsMixin.removal_over`). The
Preempted event of a removed victim follows on a pool of its own: the next removals do not wait
for it. At the parent's close, the removals under way finish; retries not yet due end then
(:data:`rulesched.run.evictions.NOT_SENT`), as the parent's own drop theirs.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from rulesched.kube.api import KubeApi
from rulesched.run import evictions
from rulesched.run.evictions import NOT_SENT, REMOVED, Ended, Removal, post_preempted, remove_once

log = logging.getLogger("rulesched.run.workers")  # (one logger for the removals' lines, either process)
EVENT_THREADS = 4


class Remover:
    """The binding process's removals: ``remove`` each handed over; ``ended(removal, how)`` is
    told once for each (any thread); ``may_write()`` is asked before each write."""

    def __init__(
        self,
        api: KubeApi,
        threads: int,
        may_write: Callable[[], bool],
        ended: Callable[[Removal, Ended], None],
    ) -> None:
        self.api, self.may_write, self.ended = api, may_write, ended
        self._pool = ThreadPoolExecutor(max_workers=max(1, threads), thread_name_prefix="evict")
        self._events = ThreadPoolExecutor(max_workers=EVENT_THREADS, thread_name_prefix="event")
        self._lock = threading.Lock()
        self._waiting: dict[str, tuple[threading.Timer, Removal]] = {}  # token -> its retry not yet due
        self._closing = False

    def remove(self, removal: Removal) -> None:
        self._pool.submit(self._remove, removal, 0)

    def close(self) -> None:
        """Finish the removals under way (and their events); those waiting to be retried end."""
        with self._lock:
            self._closing = True
            waiting, self._waiting = list(self._waiting.values()), {}
        for timer, removal in waiting:
            timer.cancel()
            self.ended(removal, NOT_SENT)
        self._pool.shutdown(wait=True)
        self._events.shutdown(wait=True)

    def _fenced(self, what: str, removal: Removal) -> bool:
        if self.may_write():
            return False
        log.warning("%s not sent: not leading", what, extra={"pod": removal.key, "node": removal.node or None})
        return True

    def _remove(self, removal: Removal, attempt: int) -> None:
        ended: Ended | None = NOT_SENT
        try:
            ended = remove_once(self.api, removal, attempt, lambda what: self._fenced(what, removal))
            if ended is None:
                self._retry(removal, attempt + 1)
            elif ended == REMOVED:
                self._events.submit(self._event, removal)
        except Exception:  # noqa: BLE001 - never fatal: the removal ends (NOT_SENT), told as such
            log.exception("removal failed")
        finally:
            if ended is not None:
                self.ended(removal, ended)

    def _event(self, removal: Removal) -> None:
        if not self._fenced("Preempted event", removal):
            post_preempted(self.api, removal)

    def _retry(self, removal: Removal, attempt: int) -> None:
        timer = threading.Timer(evictions.EVICTION_RETRY_SECONDS, self._due, (removal, attempt))
        timer.daemon = True
        with self._lock:
            closing = self._closing
            if not closing:
                self._waiting[removal.token] = (timer, removal)
        if closing:
            self.ended(removal, NOT_SENT)
        else:
            timer.start()

    def _due(self, removal: Removal, attempt: int) -> None:
        """(The timer's thread.) A retry is due, unless the close took it."""
        with self._lock:
            if self._waiting.pop(removal.token, None) is None:
                return
        try:
            self._pool.submit(self._remove, removal, attempt)
        except RuntimeError:  # (the pool shut down meanwhile)
            self.ended(removal, NOT_SENT)
