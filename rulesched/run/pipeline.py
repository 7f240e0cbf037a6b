"""(The binding process.) Bindings and their events as a pipeline, from one thread, on kept-alive
connections.

The binding process used to run :class:`rulesched.run.workers.Workers`: sixteen threads, each
posting a binding and then its Scheduled event and waiting for both answers. Measured against
the test API server, the threads cost about twice the CPU of the requests themselves (each
answer woke a thread, which then had to win the interpreter lock back). Then it went in rounds
from one thread: up to ``width`` bindings sent at once, every answer awaited, then their events
the same way. On the real API server of the test bed, busy with the pods being created, that
capped the bindings at ``width`` per two slowest answers: 130-200 pods/s where kube-scheduler,
whose every binding is a goroutine of its own, kept up with the creators (270 pods/s).

Here one thread keeps up to ``width`` requests in flight, each on a
:class:`rulesched.kube.channel.Channel` of its own, and waits (``select``) for whichever answer
comes first; the channel it came on at once takes the next request that waits, so an answer that
is slow holds up only its own channel. A binding waiting goes before every Scheduled event
waiting (each kind in the order it became ready: a binding when the scheduler hands it over, its
event when the binding succeeded), and events hold at most a quarter of the channels
(:data:`EVENT_SHARE`). On the test bed's preemption workload, with the 500 pods created within
2 s, requests went in the order they became ready on all 64 channels: in the first 3 s bindings
waited 0.9-1.6 s (median) behind the events of the bindings before them before being sent, and
the scheduler meanwhile chose some of those pods, assumed on their nodes, as victims of the
next preemptions (their bindings then answered 404, the pod gone). An event matters to nobody
waiting; a binding decides when the pod runs and what the next cycles see. An answer that does
not come within the client's timeout (30 s) fails its request (the channel is closed and opened
again).

What each binding gets is what a worker gives it: the write only while the lease holds (else
"not leading"), a 409 read to say where the pod is bound, a failed outcome for any other error
(the scheduler forgets the assumed pod and requeues it: bindings are never retried), the event
posted only for a binding that succeeded, an event whose request failed without an answer (its
connection, or no answer within the timeout) retried a few times with backoff, as client-go's
broadcaster does (:data:`EVENT_ATTEMPTS`), here on the pipeline's channels: through the blocking
call, the pipeline's thread waited out each retry's backoff and timeout (six, 30 s each, for an
API server that had stopped answering) while no other answer was read and no binding sent.

Next stage: the outcomes go back to the scheduler (:mod:`rulesched.run.binder`'s writer).
"""

from __future__ import annotations

import collections
import heapq
import logging
import os
import selectors
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from rulesched.errors import KubeError, UnavailableError
from rulesched.kube.api import EVENT_ATTEMPTS, KubeApi
from rulesched.kube.bodies import binding_body, event_body
from rulesched.kube.channel import Channel
from rulesched.kube.resources import EVENTS, PODS
from rulesched.run.workers import Outcome, Target, failed_binding, reference, scheduled_note

log = logging.getLogger(__name__)
_Binding = tuple[Target, str, str, float]  # the pod, its node, the rules' digest, write until (monotonic)
SELECT_SECONDS = 1.0  # while answers are awaited, the longest wait in select before the timeouts are checked
# Scheduled events in flight at most 1/EVENT_SHARE of the channels (at least one): the others stay
# free for bindings, and fewer requests share the API server with them. With 64 channels that is
# 16 events at once, ~800 events/s at 20 ms an answer: more than the scheduler binds.
EVENT_SHARE = 4
# Connections are opened (TCP and TLS: a round trip or two to the API server, and its certificate
# checks) this many at once on threads of their own, from the start and whenever one is closed,
# never on the pipeline's thread: opened there as each was first needed, the first 64 bindings of
# a burst went out one per 30-100 ms (the handshakes, on the loaded test bed) while no answer
# was read, and for ~3 s.
OPENERS = 4


@dataclass
class _Task:
    """A request of one binding's: the binding itself, or (``event``) its Scheduled event."""

    pod: Target
    node: str
    rules: str
    until: float
    event: bool = False
    sent: float = 0.0  # (monotonic) when it went out
    attempt: int = 0  # (an event) tries that failed without an answer


class Pipeline:
    """The pipeline's thread and the bindings that wait for it. ``outcome`` is told each
    binding's end, ``finished`` once its work (the event too) is over."""

    def __init__(
        self,
        api: KubeApi,
        width: int,
        outcome: Callable[[Outcome], None],
        finished: Callable[[], None],
    ) -> None:
        self.api, self.width = api, max(1, width)
        self.outcome, self.finished = outcome, finished
        self._waiting: collections.deque[_Binding] = collections.deque()  # handed over, not yet taken
        self._lock = threading.Lock()
        self._closing = False
        self._asleep = False  # the thread waits in select: a new binding must wake it
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_read, False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._wake_read, selectors.EVENT_READ, None)
        self._channels: list[Channel | None] = [None] * self.width
        self._free: list[int] = []  # channels open (or failed to open) and without a request
        self._opened: list[int] = []  # (under the lock) channels the openers have handed back
        self._first_opened = threading.Semaphore(0)  # released once a channel per channel first opened
        self._openers = ThreadPoolExecutor(max_workers=OPENERS, thread_name_prefix="open")
        self._bindings: collections.deque[_Task] = collections.deque()  # bindings to send, in order
        self._events: collections.deque[_Task] = collections.deque()  # events to send, after the bindings
        # events to send again once their backoff is over: (due (monotonic), order, task)
        self._retries: list[tuple[float, int, _Task]] = []
        self._retried = 0
        self._in_flight: dict[int, _Task] = {}  # channel -> its request, sent, not yet answered
        # (channel, request) in the order they were sent, so in the order their timeouts come (one
        # client timeout for every channel): only the front is ever checked. Answered requests stay
        # until they reach the front (each is removed once: amortised O(1) a request). Scanning
        # every request in flight after each answer was ~12% of this thread on the mixed workload.
        self._by_sent: collections.deque[tuple[int, _Task]] = collections.deque()
        self._events_in_flight = 0
        self._event_channels = max(1, self.width // EVENT_SHARE)
        self._thread = threading.Thread(target=self._run, name="pipeline", daemon=True)
        self._thread.start()
        for i in range(self.width):
            self._open(i)

    @staticmethod
    def available(api: KubeApi) -> bool:
        """Whether the API hands out channels (not through a proxy)."""
        channel = api.channel()
        if channel is None:
            return False
        channel.close()
        return True

    def bind(self, pod: Target, node: str, rules: str, until: float) -> None:
        """Bind ``pod``; its binding and event are written only before ``until`` (monotonic: the
        lease the scheduler held when it sent it)."""
        with self._lock:
            self._waiting.append((pod, node, rules, until))
            asleep = self._asleep
        if asleep:
            self._wake()

    def close(self) -> None:
        """Finish what waits, then stop."""
        with self._lock:
            self._closing = True
        self._wake()
        self._thread.join()
        self._openers.shutdown(wait=True, cancel_futures=True)
        for channel in self._channels:
            if channel is not None:
                channel.close()
        self._selector.close()
        os.close(self._wake_read)
        os.close(self._wake_write)

    def _wake(self) -> None:
        try:
            os.write(self._wake_write, b"\0")
        except BlockingIOError:  # (the pipe is full of wake-ups: the thread will wake anyway)
            pass

    def _run(self) -> None:
        while True:
            with self._lock:
                while self._waiting:
                    self._bindings.append(_Task(*self._waiting.popleft()))
                self._free += self._opened
                self._opened.clear()
                idle = not self._bindings and not self._events and not self._retries and not self._in_flight
                if idle and self._closing:
                    return
            try:
                self._send_ready()
                with self._lock:
                    if self._opened or (self._waiting and self._free):  # (more came meanwhile)
                        continue
                    # (set under the lock bind() takes: a binding handed over from here on wakes the select)
                    self._asleep = True
                ready = self._selector.select(self._select_timeout())
                with self._lock:
                    self._asleep = False
                for key, _ in ready:
                    if key.data is None:
                        self._drain_wake()
                    else:
                        self._answer(key.data)
                self._time_out()
            except Exception:  # noqa: BLE001 - never fatal: the requests under way fail
                log.exception("binding pipeline failed")
                for i in list(self._in_flight):
                    self._failed(i, UnavailableError("binding pipeline failed"))

    def _select_timeout(self) -> float | None:
        """How long to wait for an answer: until the oldest may have timed out, or the first
        retry is due, whichever comes first (None: until woken)."""
        timeout = self._select_seconds()
        if self._retries and self._free and self._events_in_flight < self._event_channels:
            # (else a channel freed, or handed back by an opener, wakes the select)
            due = max(0.0, self._retries[0][0] - time.monotonic())
            timeout = due if timeout is None else min(timeout, due)
        return timeout

    def _drain_wake(self) -> None:
        try:
            while os.read(self._wake_read, 4096):
                pass
        except BlockingIOError:
            pass

    def _open(self, i: int) -> None:
        """Open channel ``i`` anew on an opener's thread; it is handed back once open."""
        try:
            self._openers.submit(self._connect, i)
        except RuntimeError:  # (closing: the openers are shut down, nothing more to send)
            pass

    def _connect(self, i: int) -> None:
        """(An opener's thread; the pipeline's thread leaves channel ``i`` alone meanwhile.) A
        connection that fails to open is handed back unopened: the request sent on it opens it
        and fails as it always did (the binding requeued), and it is opened again after."""
        old, channel = self._channels[i], self.api.channel()
        assert channel is not None  # (checked by available() before the pipeline began)
        if old is not None:
            old.close()
        try:
            channel.open()
        except KubeError as err:
            log.debug("binding connection not opened: %s", err)
            channel = self.api.channel()
        except Exception:  # noqa: BLE001 - never lost: a channel not handed back would never be used again
            log.exception("binding connection not opened")
            channel = self.api.channel()
        self._channels[i] = channel
        with self._lock:
            self._opened.append(i)
            asleep = self._asleep
        if old is None:
            self._first_opened.release()
        if asleep:
            self._wake()

    def wait_open(self, seconds: float) -> int:
        """Wait, at most ``seconds``, for every channel's first opening (or its failure): how
        many were opened (handed back) meanwhile. The binding process says it takes bindings
        after this: each opening is a TLS handshake, a few ms of both sides' CPU, and 64 of them
        made once the scheduler had begun went on while the first bindings waited."""
        deadline = time.monotonic() + seconds
        for opened in range(self.width):
            if not self._first_opened.acquire(timeout=max(0.0, deadline - time.monotonic())):
                return opened
        return self.width

    def _channel(self) -> int | None:
        """A channel to send on (None: none is open); those the server closed while they were
        idle are opened again, meanwhile another is used."""
        while self._free:
            i = self._free.pop()
            channel = self._channels[i]
            if channel is not None and not channel.closed and not channel.dropped:
                return i
            self._open(i)
        return None

    def _release(self, i: int) -> None:
        """Channel ``i``'s request is over: it takes the next, or is opened again (by an opener)
        if it failed or the server closed its connection with the answer."""
        channel = self._channels[i]
        if channel is None or channel.closed or not channel.connected:
            self._open(i)
        else:
            self._free.append(i)

    def _next(self) -> _Task | None:
        """The request to send next: the first binding waiting, else, if events hold fewer than
        their share of the channels, the first event retried whose backoff is over, else the
        first event waiting."""
        if self._bindings:
            return self._bindings.popleft()
        if self._events_in_flight >= self._event_channels:
            return None
        if self._retries and self._retries[0][0] <= time.monotonic():
            return heapq.heappop(self._retries)[2]
        if self._events:
            return self._events.popleft()
        return None

    def _send_ready(self) -> None:
        """Send what is ready on the channels without a request."""
        while self._free and (task := self._next()) is not None:
            if time.monotonic() >= task.until:
                self._not_leading(task)
                continue
            i = self._channel()
            if i is None:  # (each free one had been closed by the server: back to the front of its line)
                if task.attempt:
                    self._retry_at(time.monotonic(), task)
                else:
                    (self._events if task.event else self._bindings).appendleft(task)
                return
            if task.event:
                note = scheduled_note(task.pod.key, task.node, task.rules)
                body = event_body(reference(task.pod), "Normal", "Scheduled", "Binding", note, task.pod.scheduler_name)
                method, path = "POST", EVENTS.path(task.pod.namespace)
            else:
                pod = task.pod
                body = binding_body(pod.namespace, pod.name, pod.uid, task.node)
                method, path = "POST", PODS.path(pod.namespace, pod.name, "binding")
            task.sent = time.monotonic()
            channel = self._channels[i]
            assert channel is not None
            try:
                channel.send(method, path, body, answer=False)  # (its answer is not read)
            except KubeError as err:
                self._release(i)
                self._done(task, err)
                continue
            self._in_flight[i] = task
            self._by_sent.append((i, task))
            self._events_in_flight += task.event
            self._selector.register(channel.fileno(), selectors.EVENT_READ, i)

    def _answer(self, i: int) -> None:
        """Channel ``i``'s answer has come (or begun to)."""
        task = self._taken(i)
        channel = self._channels[i]
        assert channel is not None
        self._selector.unregister(channel.fileno())
        error: KubeError | None = None
        try:
            channel.receive()
        except KubeError as err:
            error = err
        self._release(i)
        self._done(task, error)

    def _oldest(self) -> tuple[int, _Task] | None:
        """The request in flight sent first (answered ones at the front dropped on the way)."""
        while self._by_sent:
            i, task = self._by_sent[0]
            if self._in_flight.get(i) is task:
                return i, task
            self._by_sent.popleft()
        return None

    def _deadline(self, i: int, task: _Task) -> float:
        channel = self._channels[i]
        return task.sent + (channel.timeout if channel is not None else 0.0)

    def _select_seconds(self) -> float | None:
        """How long select may wait: until the oldest request's timeout, at most SELECT_SECONDS;
        for ever with nothing in flight (a new binding or an opened channel wakes it)."""
        oldest = self._oldest()
        if oldest is None:
            return None
        return min(SELECT_SECONDS, max(0.0, self._deadline(*oldest) - time.monotonic()))

    def _time_out(self) -> None:
        """Requests unanswered past the client's timeout fail; their channels are opened anew.
        Only the oldest ones are looked at: the rest were sent later and time out later."""
        now = time.monotonic()
        while (oldest := self._oldest()) is not None and now > self._deadline(*oldest):
            i = oldest[0]
            channel = self._channels[i]
            self._failed(i, UnavailableError(f"no answer within {channel.timeout if channel else 0:g}s"))

    def _taken(self, i: int) -> _Task:
        """Channel ``i``'s request, no longer in flight."""
        task = self._in_flight.pop(i)
        self._events_in_flight -= task.event
        return task

    def _failed(self, i: int, error: KubeError) -> None:
        task = self._taken(i)
        channel = self._channels[i]
        if channel is not None:
            try:
                self._selector.unregister(channel.fileno())
            except (KeyError, ValueError, OSError):
                pass
            channel.close()
        self._release(i)
        self._done(task, error)

    def _done(self, task: _Task, error: KubeError | None) -> None:
        """A request is over: tell the binding's outcome (and queue its event), or end its work."""
        pod, node = task.pod, task.node
        if task.event:
            if isinstance(error, UnavailableError) and task.attempt + 1 < EVENT_ATTEMPTS:
                self._retry(task)
                return
            if error is not None:
                log.warning("event Scheduled not posted: %s", error, extra={"pod": pod.key})
            self.finished()
            return
        seconds = time.monotonic() - task.sent
        if error is not None:
            self.outcome(failed_binding(self.api, pod, node, seconds, error))
            self.finished()
            return
        self.outcome(Outcome(pod.key, node, True, seconds=seconds, profile=pod.scheduler_name, rules=task.rules))
        self._events.append(_Task(pod, node, task.rules, task.until, event=True))

    def _not_leading(self, task: _Task) -> None:
        pod = task.pod
        if task.event:
            log.warning("Scheduled event not sent: not leading", extra={"pod": pod.key})
        else:
            log.warning("binding not sent: not leading", extra={"pod": pod.key, "node": task.node})
            self.outcome(Outcome(pod.key, task.node, False, "not leading", profile=pod.scheduler_name))
        self.finished()

    def _retry(self, task: _Task) -> None:
        """An event whose request failed without an answer: sent again after a backoff (as
        KubeApi.post_event's: 50 ms, doubling)."""
        delay = 0.05 * 2**task.attempt
        task.attempt += 1
        self._retry_at(time.monotonic() + delay, task)

    def _retry_at(self, due: float, task: _Task) -> None:
        self._retried += 1  # (the heap's tie-break: tasks do not compare)
        heapq.heappush(self._retries, (due, self._retried, task))
