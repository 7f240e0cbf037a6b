"""(The binding process.) Bindings in rounds, from one thread, on kept-alive connections.

The binding process used to run :class:`rulesched.run.workers.Workers`: sixteen threads, each
posting a binding and then its Scheduled event and waiting for both answers. Measured against
the test API server, the threads cost about twice the CPU of the requests themselves (each
answer woke a thread, which then had to win the interpreter lock back: futexes and context
switches, as much in the kernel as in Python). Here one thread takes up to ``width`` bindings
that wait, sends each binding on a :class:`rulesched.kube.channel.Channel` of its own, reads
the answers in turn (the API server works on all of them meanwhile), hands the outcomes on,
then does the same with the Scheduled events of those that bound. Bindings that arrive during
a round wait for the next one (a round takes a few milliseconds). The price: an answer that does not come holds its whole
round up to the client's timeout (30 s), where it held one thread of sixteen.

What each binding gets is what a worker gives it: the write only while the lease holds (else
"not leading"), a 409 read to say where the pod is bound, a failed outcome for any other error
(the scheduler forgets the assumed pod and requeues it: bindings are never retried), the event
posted only for a binding that succeeded, a connection failure of an event retried through the
blocking call (which retries a few times, as client-go's broadcaster does).

Next stage: the outcomes go back to the scheduler (:mod:`rulesched.run.binder`'s writer).
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable, Sequence

from rulesched.errors import KubeError, UnavailableError
from rulesched.kube.api import KubeApi, binding_body, event_body
from rulesched.kube.channel import Channel
from rulesched.kube.resources import EVENTS, PODS
from rulesched.run.workers import Outcome, Target, failed_binding, reference, scheduled_note

log = logging.getLogger(__name__)
_Binding = tuple[Target, str, str, float]  # the pod, its node, the rules' digest, write until (monotonic)


class Rounds:
    """The round-taking thread and the bindings that wait for it. ``outcome`` is told each
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
        self._waiting: collections.deque[_Binding] = collections.deque()
        self._ready = threading.Condition()
        self._closing = False
        self._channels: list[Channel | None] = [None] * self.width
        self._thread = threading.Thread(target=self._run, name="rounds", daemon=True)
        self._thread.start()

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
        with self._ready:
            self._waiting.append((pod, node, rules, until))
            self._ready.notify()

    def close(self) -> None:
        """Finish what waits, then stop."""
        with self._ready:
            self._closing = True
            self._ready.notify()
        self._thread.join()
        for channel in self._channels:
            if channel is not None:
                channel.close()

    def _run(self) -> None:
        while True:
            with self._ready:
                while not self._waiting and not self._closing:
                    self._ready.wait()
                if not self._waiting:
                    return
                batch = [self._waiting.popleft() for _ in range(min(self.width, len(self._waiting)))]
            try:
                self._round(batch)
            except Exception:  # noqa: BLE001 - never fatal: the bindings of the round fail
                log.exception("binding round failed")
                for pod, node, _, _ in batch:
                    self.outcome(Outcome(pod.key, node, False, "binding round failed", profile=pod.scheduler_name))
            for _ in batch:
                self.finished()

    def _channel(self, i: int) -> Channel:
        channel = self._channels[i]
        if channel is None or channel.closed:
            channel = self.api.channel()
            assert channel is not None  # (checked by available() before the rounds began)
            self._channels[i] = channel
        return channel

    def _exchange(self, asks: Sequence[tuple[int, str, str, object]]) -> list[KubeError | None]:
        """Each request (channel, method, path, body) sent, then each answer read in turn, the
        API server working on all of them meanwhile: per request None, or the error it was."""
        errors: list[KubeError | None] = []
        for i, method, path, body in asks:
            try:
                self._channel(i).send(method, path, body)
                errors.append(None)
            except KubeError as err:
                errors.append(err)
        for k, (i, *_) in enumerate(asks):
            if errors[k] is None:
                try:
                    self._channel(i).receive()
                except KubeError as err:
                    errors[k] = err
        return errors

    def _round(self, batch: list[_Binding]) -> None:
        started = time.monotonic()
        live: list[tuple[int, _Binding]] = []
        for i, binding in enumerate(batch):
            pod, node, _, until = binding
            if time.monotonic() >= until:
                log.warning("binding not sent: not leading", extra={"pod": pod.key, "node": node})
                self.outcome(Outcome(pod.key, node, False, "not leading", profile=pod.scheduler_name))
            else:
                live.append((i, binding))
        asks = [
            (
                i,
                "POST",
                PODS.path(pod.namespace, pod.name, "binding"),
                binding_body(pod.namespace, pod.name, pod.uid, node),
            )
            for i, (pod, node, _, _) in live
        ]
        bound: list[tuple[int, _Binding]] = []
        for (i, binding), err in zip(live, self._exchange(asks), strict=True):
            pod, node, rules, _ = binding
            seconds = time.monotonic() - started
            if err is not None:
                self.outcome(failed_binding(self.api, pod, node, seconds, err))
                continue
            self.outcome(Outcome(pod.key, node, True, seconds=seconds, profile=pod.scheduler_name, rules=rules))
            bound.append((i, binding))
        self._events(bound)

    def _events(self, bound: list[tuple[int, _Binding]]) -> None:
        """The Scheduled events of the round's bindings that succeeded, sent together too."""
        posted: list[tuple[Target, str, float]] = []
        asks: list[tuple[int, str, str, object]] = []
        for i, (pod, node, rules, until) in bound:
            if time.monotonic() >= until:
                log.warning("Scheduled event not sent: not leading", extra={"pod": pod.key})
                continue
            note = scheduled_note(pod.key, node, rules)
            body = event_body(reference(pod), "Normal", "Scheduled", "Binding", note, pod.scheduler_name)
            posted.append((pod, note, until))
            asks.append((i, "POST", EVENTS.path(pod.namespace), body))
        for (pod, note, until), err in zip(posted, self._exchange(asks), strict=True):
            if isinstance(err, UnavailableError):
                self._post_again(pod, note, until)
            elif err is not None:
                log.warning("event Scheduled not posted: %s", err, extra={"pod": pod.key})

    def _post_again(self, pod: Target, note: str, until: float) -> None:
        """An event whose connection failed: the blocking call, with its retries."""
        if time.monotonic() >= until:
            return
        try:
            self.api.post_event(reference(pod), "Normal", "Scheduled", "Binding", note, pod.scheduler_name)
        except KubeError as err:
            log.warning("event Scheduled not posted: %s", err, extra={"pod": pod.key})
